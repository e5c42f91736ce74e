"""What the client tests share: the weather tool each client wraps its own way, and the model
a structured answer must fill."""

from __future__ import annotations

from pydantic import BaseModel


def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city's name
    """
    return f"sunny, 24 C in {city}"


class Weather(BaseModel):
    city: str
    temp: int
