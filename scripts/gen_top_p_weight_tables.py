#!/usr/bin/env python3
"""Prints the two tables of lib/core/top_p_weight.h, as the macros LOOM_TOP_P_COARSE and
LOOM_TOP_P_FINE: round(2^31 * 2^(-i/64)) and round(2^31 * 2^(-i/4096)) for i in [0, 64),
computed with 60 significant digits and rounded half to even. The tables are the definition;
this script says where they came from."""
from decimal import ROUND_HALF_EVEN, Decimal, getcontext

getcontext().prec = 60
LN2 = Decimal(2).ln()


def table(denominator):
    return [int((Decimal(2) ** 31 * (-(Decimal(i) / denominator) * LN2).exp())
                .to_integral_value(rounding=ROUND_HALF_EVEN)) for i in range(64)]


for name, den in (("LOOM_TOP_P_COARSE", 64), ("LOOM_TOP_P_FINE", 4096)):
    values = [f"{v}u" for v in table(den)]
    rows = [", ".join(values[r:r + 6]) for r in range(0, 64, 6)]
    print(f"#define {name} \\\n  " + ", \\\n  ".join(rows))
