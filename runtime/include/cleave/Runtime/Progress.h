/*===- Progress.h - What each rank of a job publishes about itself --------===*
 *
 * cleave-run gives a multi-rank job a folder (CLEAVE_PROGRESS_DIR); each rank
 * maps a file `rank<r>` there holding this record and updates it around every
 * collective. A rank's watchdog reads its peers' records to name the ranks
 * that did not reach a collective; cleave-run reads them after a failed job
 * to name the ranks that ended early, with the status a rank exited with
 * when it ended the job itself (mpiexec's own status depends on which end
 * it notices first). Shared by the runtime and cleave-run.
 *
 *===----------------------------------------------------------------------===*/

#ifndef CLEAVE_RUNTIME_PROGRESS_H
#define CLEAVE_RUNTIME_PROGRESS_H

#include <stdint.h>

typedef struct {
  uint64_t completed; /* collectives finished */
  uint64_t inside;    /* 1 while waiting in a collective */
  uint64_t finished;  /* 1 once the rank has left the job cleanly */
  char kind[40];      /* the last collective entered */
  uint64_t exited;    /* 1 once the rank has ended the job itself (an error,
                         the fault hook), with status `status` */
  uint64_t status;
} cleave_progress;

#endif /* CLEAVE_RUNTIME_PROGRESS_H */
