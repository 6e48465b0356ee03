"""The syntax of INSPECT_LLM_PRICES, read by the settings (Django-free, as the settings import
it). The price table itself and what a call cost are the agents' (sessions/agents/pricing.py)."""

from __future__ import annotations


def parse_prices(text: str) -> dict[str, tuple[float, float]]:
    """Parse INSPECT_LLM_PRICES: `model=INPUT/OUTPUT,...` in USD per million tokens.

    Raises ValueError naming the bad entry."""
    prices: dict[str, tuple[float, float]] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        model, sep, pair = entry.partition("=")
        given, slash, taken = pair.partition("/")
        try:
            if not (sep and slash and model.strip()):
                raise ValueError
            prices[model.strip()] = (float(given), float(taken))
        except ValueError:
            raise ValueError(
                f"{entry!r} is not MODEL=INPUT/OUTPUT (USD per million tokens), e.g. gpt-4.1=2/8"
            ) from None
    return prices
