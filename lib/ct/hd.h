/*
 * lib/ct/hd.h - ACCEL__CT_HD marks the CT code that the CPU and the CUDA
 * kernels share (edt_line.h, ft_line.h, peak_window.h): host and device
 * functions under nvcc, plain functions in C.
 */
#ifndef ACCEL_CT_HD_H
#define ACCEL_CT_HD_H

#if defined(__CUDACC__)
#define ACCEL__CT_HD __host__ __device__
#else
#define ACCEL__CT_HD
#endif

#endif
