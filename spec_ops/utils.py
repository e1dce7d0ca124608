"""Plain helpers of SPEC §2 and the padding slot id of SPEC §0."""

PADDING_SLOT_ID = -1


def next_power_of_2(n):
    """1 for n <= 0, else the smallest power of two >= n (exact for any int)."""
    return 1 if n <= 0 else 1 << (n - 1).bit_length()


def unconditional_to_conditional_rates(rates):
    """Per-position acceptance rates: c_0 = p_0, c_i = p_i / p_{i-1} (0.0 when p_{i-1} <= 0)."""
    return [p if i == 0 else (p / rates[i - 1] if rates[i - 1] > 0 else 0.0)
            for i, p in enumerate(rates)]
