"""Seed 001: "What's 17 times 24, then add 100?" -- the calculator called twice, then an answer."""

import sys

from _common import main

if __name__ == "__main__":
    sys.exit(
        main(
            "What's 17 times 24, then add 100?",
            [
                'TOOL: calculate ARGS: {"expression": "17 * 24"}',
                'TOOL: calculate ARGS: {"expression": "408 + 100"}',
                "ANSWER: 17 × 24 = 408, plus 100 = 508.",
            ],
        )
    )
