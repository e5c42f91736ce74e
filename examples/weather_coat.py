"""Seed 000: "What's the weather in Paris, and should I take a coat?" -- one lookup, then advice."""

import sys

from _common import main

if __name__ == "__main__":
    sys.exit(
        main(
            "What's the weather in Paris, and should I take a coat?",
            [
                'TOOL: get_weather ARGS: {"city": "Paris"}',
                "ANSWER: It's 8 °C and raining in Paris -- yes, take a coat and something waterproof.",
            ],
        )
    )
