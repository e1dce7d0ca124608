"""Plain helpers and the padding slot id (docs/conventions.md)."""

from ._triton._launch import next_power_of_2  # noqa: F401  (the launchers' own)

PADDING_SLOT_ID = -1


def unconditional_to_conditional_rates(rates):
    """Per-position acceptance rates: c_0 = p_0, c_i = p_i / p_{i-1} (0.0 when p_{i-1} <= 0)."""
    return [p if i == 0 else (p / rates[i - 1] if rates[i - 1] > 0 else 0.0)
            for i, p in enumerate(rates)]
