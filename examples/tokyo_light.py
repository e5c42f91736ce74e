"""Seed 002: weather in Tokyo, times 10, then turn off the kitchen light -- three chained tools."""

import sys

from _common import main

if __name__ == "__main__":
    sys.exit(
        main(
            "Get the weather in Tokyo, multiply the temperature by 10, and then turn off the kitchen light.",
            [
                'TOOL: get_weather ARGS: {"city": "Tokyo"}',
                'TOOL: multiply ARGS: {"a": 25, "b": 10}',
                'TOOL: toggle_light ARGS: {"room": "kitchen", "on": false}',
                "ANSWER: The temperature in Tokyo is 25 °C; times 10 is 250. The kitchen light is now off.",
            ],
        )
    )
