/*
 * accel/accel.h - the umbrella header of libaccel: include this one.
 *
 * libaccel accelerates photo hashing and similarity search, CT segmentation,
 * sky view factors and image registration on NVIDIA GPUs, with an OpenMP CPU
 * path that gives the same results. Start with accel/core.h (contexts,
 * errors, logging, the fallback policy); each domain has its own header.
 */
#ifndef ACCEL_ACCEL_H
#define ACCEL_ACCEL_H

#include "core.h"
#include "ct.h"
#include "hash.h"
#include "image.h"
#include "index.h"
#include "io.h"
#include "svf.h"

#endif /* ACCEL_ACCEL_H */
