/* accel register, accel warp: B-spline registration and warping. */
#include "cli.h"

#include <stdio.h>

static int not_yet(const cli_globals *g, int argc, char **argv) {
  (void)g, (void)argc, (void)argv;
  cli_error("not implemented yet");
  return 1;
}

const cli_command cli_register_command = {.name = "register",
                                          .summary = "B-spline registration of two images (elastix's model)",
                                          .usage = "usage: accel register --fixed F --moving M [options]\n",
                                          .run = not_yet};
const cli_command cli_warp_command = {.name = "warp",
                                      .summary = "warp images with an elastix transform file",
                                      .usage = "usage: accel warp --transform T.txt IN OUT [IN OUT]...\n",
                                      .run = not_yet};
