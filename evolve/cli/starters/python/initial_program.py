"""Approximate sin(x) on [0, pi/2] with an odd polynomial x + C3 x^3 + C5 x^5 + C7 x^7.

The evaluator calls approximate(xs) and compares it with math.sin; the fewer digits lost,
the higher the score. A model may rewrite the whole approach (range reduction, another
basis); the autotuner varies the coefficients.
"""

# EVOLVE-BLOCK-START
C3 = -0.15  # @knob float -0.5..-0.01
C5 = 0.01  # @knob float 0.0001..0.1
C7 = -0.0001  # @knob float -0.01..-0.000001


def approximate(xs: list[float]) -> list[float]:
    out = []
    for x in xs:
        x2 = x * x
        out.append(x * (1 + x2 * (C3 + x2 * (C5 + x2 * C7))))
    return out


# EVOLVE-BLOCK-END
