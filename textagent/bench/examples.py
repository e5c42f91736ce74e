"""Worked examples for the bench's tools, and which of them (and of the demo's) a tool set shows.

Their values differ from every task of the shipped suite: they show the form of a call and of an
answer, never a task's answer (tests/bench/test_split.py fails on one close to a test question).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..toolkits import demo
from ..tools import Example

__all__ = ["EXAMPLES", "pick_examples"]

# Shown like the demo's (see toolkits.demo.DEMO_EXAMPLES).
EXAMPLES: tuple[Example, ...] = (
    Example(
        "Can 221 be divided only by 1 and by itself?",
        (("is_prime", {"n": 221}, "false"),),
        "No, 221 is not a prime number.",
    ),
    Example(
        "How many words are in 'to be or not to be'?",
        (("word_count", {"text": "to be or not to be"}, "6"),),
        "'to be or not to be' has 6 words.",
    ),
    Example(
        "Write 'drawer' backwards.",
        (("reverse_text", {"text": "drawer"}, "reward"),),
        "'drawer' backwards is 'reward'.",
    ),
    Example(
        "Which city is the capital of Egypt?",
        (("capital_of", {"country": "Egypt"}, "Cairo"),),
        "The capital of Egypt is Cairo.",
    ),
    Example(
        "How many people live in Berlin?",
        (("get_population", {"city": "Berlin"}, '{"city": "Berlin", "population": 3800000}'),),
        "Berlin has 3800000 inhabitants.",
    ),
    Example(
        "What does one UMBRELLA share cost?",
        (
            (
                "get_stock_price",
                {"symbol": "UMBRELLA"},
                "ERROR: ConnectionError: quote service busy, please retry the same call",
            ),
            ("get_stock_price", {"symbol": "UMBRELLA"}, '{"symbol": "UMBRELLA", "price_usd": 310.2}'),
        ),
        "One UMBRELLA share costs 310.20 USD.",
    ),
    Example(
        "Convert 40 GBP to USD.",
        (
            (
                "convert_currency",
                {"amount": 40, "from_currency": "GBP", "to_currency": "USD"},
                '{"amount": 40, "from": "GBP", "to": "USD", "result": 60}',
            ),
        ),
        "40 GBP is 60 USD.",
    ),
    Example(
        "How many kilograms are 10 pounds?",
        (
            (
                "convert_units",
                {"value": 10, "from_unit": "lb", "to_unit": "kg"},
                '{"value": 10, "from_unit": "lb", "to_unit": "kg", "result": 4.54}',
            ),
        ),
        "10 pounds are 4.54 kg.",
    ),
    Example(
        "Book a table for 3 at Luigi's at 6 pm.",
        (
            (
                "book_table",
                {"restaurant": "Luigi's", "people": 3, "time": "18:00"},
                '{"restaurant": "Luigi\'s", "people": 3, "time": "18:00", "outdoor": false, "confirmation": "L-3-1800"}',
            ),
        ),
        "Your table for 3 at Luigi's at 18:00 is booked; the confirmation code is L-3-1800.",
    ),
    Example(
        "What will the weather be in London over the next 2 days?",
        (
            (
                "get_forecast",
                {"city": "London", "days": 2},
                '{"city": "London", "unit": "C", "daily_temps": [14, 16], "condition": "rain"}',
            ),
        ),
        "London, next 2 days: 14 °C and 16 °C, with rain.",
    ),
    Example(
        "Cool the office down to 19 degrees.",
        (
            (
                "set_thermostat",
                {"room": "office", "temperature": 19, "mode": "cool"},
                "office thermostat set to 19 C (cool)",
            ),
        ),
        "The office thermostat is set to 19 °C in cool mode.",
    ),
    Example(
        "How many hours does the Z5 camera run on one charge, says its manual?",
        (
            (
                "read_manual",
                {"product": "Z5"},
                "Z5 camera manual. Key specifications: battery life 3 hours; weight 410 g.\n\nSection 1. Safety notes...",
            ),
        ),
        "Its manual says the Z5 camera runs 3 hours on one charge.",
    ),
    Example(
        "How many orders has customer C-2002 placed?",
        (
            (
                "list_orders",
                {"customer_id": "C-2002"},
                '[{"order": "O-310", "date": "2025-05-02", "total_eur": 12.5, "items": 1}, '
                '{"order": "O-122", "date": "2025-01-20", "total_eur": 40.0, "items": 2}]',
            ),
        ),
        "Customer C-2002 has placed 2 orders.",
    ),
    Example(
        "How many warnings did the search service log today?",
        (
            (
                "read_log",
                {"service": "search"},
                "SUMMARY search: 2 errors, 11 warnings today\n2025-06-14T00:00:00 INFO search ...",
            ),
        ),
        "The search service logged 11 warnings today.",
    ),
    Example("What is 13 times 7?", (("multiply", {"a": 13, "b": 7}, "91"),), "13 times 7 is 91."),
)


def pick_examples(names: Iterable[str]) -> tuple[Example, ...]:
    """The worked examples a set of tools can show: the demo's and the bench's whose every
    tool is in the set, with the demo's answered without tools first; empty when no example
    calls a tool of the set. The agent shows the ones most like each question
    (ToolSet.max_examples = demo.MAX_EXAMPLES)."""
    names = set(names)
    demo_tools = set(demo.demo_tools())
    fits = [e for e in demo.DEMO_EXAMPLES if e.calls and {c[0] for c in e.calls} <= names]
    # A set holding the demo's tools shows what `textagent run` shows; bench examples join for
    # the other tools ("13 times 7" with multiply was copied into "17 times 24, then add 100").
    fits += [
        e
        for e in EXAMPLES
        if {c[0] for c in e.calls} <= names and (not demo_tools <= names or {c[0] for c in e.calls} - demo_tools)
    ]
    direct = [e for e in demo.DEMO_EXAMPLES if not e.calls]
    return (*direct, *fits) if fits else ()
