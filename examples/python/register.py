"""Register two images with libaccel and warp with the transform found.

    python3 examples/python/register.py [FIXED.npy MOVING.npy [OUT_DIR]]

Without arguments it makes a pair with a known deformation (a smooth scene,
and the same scene seen through a B-spline deformation and a shift),
registers it, and checks the displacement found against the truth. With
arguments it registers two 2-D .npy images and, with OUT_DIR, writes the
elastix transform file, the displacement field and the warped moving image
there.
"""
import os
import sys

from samples import require_numpy

np = require_numpy()
import accel  # noqa: E402


def scene(x, y):
    return (100 + 40 * np.sin(x / 7.0) * np.cos(y / 9.0) + 30 * np.sin((x + 2 * y) / 13.0)
            + 20 * np.cos((3 * x - y) / 17.0))


def synthetic_pair(ctx, h=192, w=160):
    """fixed(p) = moving(T(p)) with T known: returns fixed, moving, the true (2, h, w) displacement."""
    truth = accel.Transform((h, w), 64.0, ctx=ctx)
    truth.parameters = np.random.default_rng(1).uniform(-3, 3, truth.parameters.size)
    truth.set_initial("translation", [1.5, -2.0])
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    q = truth.points(np.stack([x, y], axis=-1))
    fixed = scene(q[..., 0], q[..., 1]).astype(np.float32)
    moving = scene(x, y).astype(np.float32)
    return fixed, moving, truth.field()


def main():
    with accel.Context() as ctx:
        if len(sys.argv) > 2:
            fixed, moving, truth = np.load(sys.argv[1]), np.load(sys.argv[2]), None
        else:
            fixed, moving, truth = synthetic_pair(ctx)
        t = ctx.reg.register(fixed, moving, grid_spacing=32, levels=3)
        for i, level in enumerate(t.report["levels"]):
            print("level %d: %d iterations (%s), metric %.4g -> %.4g" % (
                i, level["iterations"], level["stop"], level["metric_first"], level["metric_last"]))
        warped = t.warp(moving)
        u = t.field()
        print("%s on %s: %.2f s, metric %.4g" % (fixed.shape, ctx.info()["backend"], t.report["seconds"],
                                                 t.report["metric"]))
        if len(sys.argv) > 3:
            out = sys.argv[3]
            os.makedirs(out, exist_ok=True)
            t.save(os.path.join(out, "TransformParameters.txt"))
            np.save(os.path.join(out, "field.npy"), u)
            np.save(os.path.join(out, "warped.npy"), warped)
        if truth is not None:
            err = np.hypot(*(u - truth))[32:-32, 32:-32]
            print("field error over the interior: mean %.3f px, max %.3f px (displacement up to %.1f px)" % (
                err.mean(), err.max(), np.hypot(*truth).max()))
            assert err.mean() < 0.25, "the deformation was not recovered"
    return 0


if __name__ == "__main__":
    sys.exit(main())
