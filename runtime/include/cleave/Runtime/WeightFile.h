/*===- WeightFile.h - The bundle's weight file format ---------------------===*
 *
 * weights.bin: a 64-byte header, then every parameter at a 64-byte aligned
 * offset (from the start of the file), zero padding between them. The runtime
 * maps the file and hands the parameters to the model without copying.
 *
 *   bytes 0-7    magic "CLVWGT01"
 *   bytes 8-15   total file size, little endian
 *   bytes 16-23  checksum of bytes [64, size), cleave_checksum64
 *   bytes 24-63  zero
 *
 * The writer (cleave-compile) and the reader (runtime) share this header.
 *
 *===----------------------------------------------------------------------===*/

#ifndef CLEAVE_RUNTIME_WEIGHTFILE_H
#define CLEAVE_RUNTIME_WEIGHTFILE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CLEAVE_WEIGHTS_MAGIC "CLVWGT01"
#define CLEAVE_WEIGHTS_HEADER_BYTES 64
#define CLEAVE_WEIGHTS_ALIGNMENT 64

/* A streaming 64-bit checksum over bytes fed in any chunking: the result
 * depends only on the bytes. Detects corruption, not tampering. */
typedef struct {
  uint64_t hash;
  uint64_t length;
  uint64_t pending; /* bytes of an incomplete 8-byte word */
  unsigned pendingBytes;
} cleave_checksum_state;

static inline void cleave_checksum_init(cleave_checksum_state *s) {
  s->hash = 0x6a09e667f3bcc908ull;
  s->length = 0;
  s->pending = 0;
  s->pendingBytes = 0;
}

static inline uint64_t cleave_checksum_mix(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 29);
}

static inline void cleave_checksum_update(cleave_checksum_state *s,
                                          const void *data, size_t size) {
  const unsigned char *p = (const unsigned char *)data;
  size_t i = 0;
  s->length += size;
  while (s->pendingBytes != 0 && i < size) {
    s->pending |= (uint64_t)p[i++] << (8 * s->pendingBytes);
    if (++s->pendingBytes == 8) {
      s->hash = cleave_checksum_mix(s->hash, s->pending);
      s->pending = 0;
      s->pendingBytes = 0;
    }
  }
  uint64_t h = s->hash;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = cleave_checksum_mix(h, w);
  }
  s->hash = h;
  for (; i < size; ++i)
    s->pending |= (uint64_t)p[i] << (8 * s->pendingBytes++);
}

static inline uint64_t cleave_checksum_finish(const cleave_checksum_state *s) {
  uint64_t h = s->hash;
  if (s->pendingBytes != 0)
    h = cleave_checksum_mix(h, s->pending);
  h ^= s->length;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

#endif /* CLEAVE_RUNTIME_WEIGHTFILE_H */
