"""What a model call cost, where the price is known.

Prices are USD per million tokens (input, output), from the providers' public price pages; a
deployment adds or corrects entries with INSPECT_LLM_PRICES (parsed by inspect_web/pricing.py).
A model missing from the table reports its tokens and `cost_usd: null`, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping

# (input, output) USD per 1M tokens. Keys match the start of a model name, longest first, so
# "gpt-4.1-mini-2025-04-14" finds "gpt-4.1-mini".
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5-codex": (1.25, 10.00),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-haiku-4-5": (1.00, 5.00),
}


def price_of(model: str, extra: Mapping[str, tuple[float, float]] | None = None):
    """(input, output) USD per million tokens for `model`, or None if unknown."""
    table = {**PRICES, **(extra or {})}
    name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-4.1" via a gateway
    for key in sorted(table, key=len, reverse=True):
        if name == key.lower() or name.startswith(key.lower() + "-"):
            return table[key]
    return None


def cost_usd(
    model: str,
    input_tokens: int,
    output_tokens: int,
    extra: Mapping[str, tuple[float, float]] | None = None,
) -> float | None:
    """The cost of one call in USD, rounded to a millionth of a dollar; None if unpriced."""
    price = price_of(model, extra)
    if price is None:
        return None
    return round((input_tokens * price[0] + output_tokens * price[1]) / 1_000_000, 6)


def usd(amount: float) -> str:
    """A dollar amount for a message: cents when that is exact, else four decimals (a $0.004
    limit must not read as "$0.00")."""
    return f"${amount:,.2f}" if round(amount, 2) == amount else f"${amount:,.4f}"
