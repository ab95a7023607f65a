#!/usr/bin/python3
# fit_normal_cdf.py: derives the coefficients of math::normal_cdf (tensor/elementwise_math.h), the
# f32 standard normal CDF behind GELU, and reports how close the f32 evaluation comes to Phi.
#
# The form: for z = |x| / sqrt 2 and t = 1 / (1 + z/2),
#     0.5 erfc(z) = t exp(-z^2 + P(t)),
# so P(t) = log(0.5 erfc(z) / t) + z^2, a smooth function of t in (0, 1]. We fit P, a polynomial
# of degree 9, by least squares at Chebyshev nodes for z in [0, 10] (t in [1/6, 1]); beyond z = 10
# the tail is far below f32's smallest normal. The target is computed with mpmath at 30 digits.
# The f32 check runs the same operations in the same order as the C++ (numpy float32, no fused
# multiply-add: the build sets -ffp-contract=off), with libm's exp standing in for exp_softmax.
# Needs numpy and mpmath (Debian: python3-numpy python3-mpmath). Takes a few seconds:
#   /usr/bin/python3 scripts/fit_normal_cdf.py
import math
import sys

try:
    import mpmath as mp
    import numpy as np
except ImportError as e:
    sys.exit(f"fit_normal_cdf.py: {e}; install python3-numpy and python3-mpmath")

mp.mp.dps = 30
DEGREE, Z_MAX, NODES = 9, 10.0, 800
f32 = np.float32


def exponent(z):  # P at z, exactly (to 30 digits)
    t = 1 / (1 + mp.mpf(z) / 2)
    return float(mp.log(mp.erfc(z) / 2 / t) + mp.mpf(z) ** 2)


def fit():
    lo, hi = 1 / (1 + Z_MAX / 2), 1.0
    k = np.arange(NODES)
    t = (lo + hi) / 2 + (hi - lo) / 2 * np.cos((2 * k + 1) * np.pi / (2 * NODES))
    z = 2 * (1 / t - 1)
    return np.polynomial.polynomial.polyfit(t, [exponent(v) for v in z], DEGREE)  # c[0] + c[1] t + ...


def normal_cdf_f32(x, c):  # the C++ function, operation by operation
    x = f32(x)
    z = f32(abs(x) * f32(0.70710678118654752440))
    t = f32(f32(1) / f32(f32(1) + f32(f32(0.5) * z)))
    p = f32(c[-1])
    for coef in c[-2::-1]:
        p = f32(f32(p * t) + f32(coef))
    e = f32(p - f32(z * z))
    tail = f32(0) if e < -87 else f32(t * f32(math.exp(float(e))))
    return tail if x < 0 else f32(f32(1) - tail)


def main():
    c = fit()
    zs = np.linspace(0, Z_MAX, 2001)
    ts = 1 / (1 + zs / 2)
    fit_err = max(abs(np.polynomial.polynomial.polyval(t, c) - exponent(z)) for z, t in zip(zs, ts))
    print(f"degree {DEGREE}, z in [0, {Z_MAX}]: worst error in the exponent {fit_err:.2e}")
    print("coefficients, highest power first (Horner order, as in the C++):")
    for coef in c[::-1]:
        print(f"  {coef:.10e}")
    worst_abs = worst_rel = 0.0
    for x in np.arange(-13 * 256, 7 * 256 + 1) / 256.0:
        want = float(mp.ncdf(x))
        got = float(normal_cdf_f32(x, c))
        worst_abs = max(worst_abs, abs(got - want))
        if want > 1e-37:
            worst_rel = max(worst_rel, abs(got - want) / want)
    print(f"f32 evaluation over [-13, 7], every 1/256: worst absolute error {worst_abs:.2e}, "
          f"worst relative error {worst_rel:.2e} (where Phi > 1e-37)")


if __name__ == "__main__":
    main()
