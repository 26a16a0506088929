/*
 * accel/accel.h - the umbrella header of libaccel: include this one.
 *
 * libaccel accelerates photo hashing and similarity search, CT segmentation,
 * and shadows and sky view factors on NVIDIA GPUs, with an OpenMP CPU path
 * that gives the same results. Start with accel/core.h (contexts, errors,
 * logging, the fallback policy): its conventions (what a failed call returns
 * and leaves behind, where its message is read, which calls may run at once)
 * hold in every domain header, which adds only its own rules.
 */
#ifndef ACCEL_ACCEL_H
#define ACCEL_ACCEL_H

#include "core.h"
#include "ct.h"
#include "hash.h"
#include "image.h"
#include "index.h"
#include "io.h"
#include "reg.h"
#include "svf.h"

#endif /* ACCEL_ACCEL_H */
