"""The suite's tools, built fresh for every episode and bound to its ``Env`` (``bench.world``).

The demo tools keep their exact names, descriptions and schemas (``calculate``, ``get_weather``,
``multiply`` are the demo's own objects; ``get_time`` reads the episode's frozen clock and
``toggle_light`` its lights). The bench-only tools cover what the suite needs: several typed
parameters and enums, single-parameter ("bare argument") tools, a tool that fails the first time,
tools with long output, and distractors. ``TOOL_BUILDERS`` maps each name to its builder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from ..toolkits import demo
from ..tools import Tool
from .world import Env, counted

__all__ = ["RATES", "STOCKS", "TOOL_BUILDERS"]


def _from_function(env: Env, fn: Callable[..., Any]) -> Tool:
    """A tool whose schema is derived from ``fn`` (typed parameters, docstring), its calls counted in ``env``."""
    tool = Tool.from_function(fn)
    return counted(env, tool, tool.fn)


# --------------------------------------------------------------------------------------------
# Demo tools, made per-episode
# --------------------------------------------------------------------------------------------


def _calculate(env: Env) -> Tool:
    return counted(env, demo.calculate, demo.calculate.fn)


def _get_weather(env: Env) -> Tool:
    return counted(env, demo.get_weather, demo.get_weather.fn)


def _multiply(env: Env) -> Tool:
    return counted(env, demo.multiply, demo.multiply.fn)


def _get_time(env: Env) -> Tool:
    def get_time(timezone: str = "UTC") -> dict[str, str]:
        if not isinstance(timezone, str):
            raise TypeError(f'timezone must be text like "Europe/Paris", not {type(timezone).__name__}')
        label, tz = demo.resolve_zone(timezone)
        now = env.now.astimezone(tz).replace(microsecond=0)
        return {"timezone": label, "now": now.isoformat(), "weekday": now.strftime("%A")}

    return counted(env, demo.get_time, get_time)


def _toggle_light(env: Env) -> Tool:
    def toggle_light(room: str, on: bool) -> str:
        return demo.switch_light(env.lights, env.lock, room, on)

    return counted(env, demo.toggle_light, toggle_light)


# --------------------------------------------------------------------------------------------
# Bench-only tools (fixed demo data)
# --------------------------------------------------------------------------------------------

STOCKS = {"ACME": 123.45, "GLOBEX": 87.5, "INITECH": 42.0, "UMBRELLA": 310.2}
# Fixed demo exchange rates: 1 unit of the key's currency in USD.
RATES = {"USD": 1.0, "EUR": 1.25, "GBP": 1.5, "JPY": 0.0078125, "CHF": 1.125}
CAPITALS = {
    "france": "Paris",
    "australia": "Canberra",
    "japan": "Tokyo",
    "canada": "Ottawa",
    "brazil": "Brasília",
    "kenya": "Nairobi",
    "portugal": "Lisbon",
    "germany": "Berlin",
    "egypt": "Cairo",
    "iceland": "Reykjavik",
}
POPULATION = {
    "lisbon": 545_000,
    "paris": 2_100_000,
    "tokyo": 14_000_000,
    "reykjavik": 139_000,
    "cairo": 10_100_000,
    "berlin": 3_800_000,
}
_UNITS = {  # unit -> (dimension, factor to the base unit); temperatures are handled apart
    "km": ("length", 1000.0),
    "m": ("length", 1.0),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "kg": ("mass", 1.0),
    "lb": ("mass", 0.45359237),
    "l": ("volume", 1.0),
    "gal": ("volume", 3.785411784),
    "c": ("temperature", None),
    "f": ("temperature", None),
}
Unit = Literal["km", "m", "mi", "ft", "kg", "lb", "l", "gal", "c", "f"]
Currency = Literal["USD", "EUR", "GBP", "JPY", "CHF"]


def _tidy(value: float, digits: int = 4) -> int | float:
    value = round(value, digits)
    return int(value) if float(value).is_integer() else value


def _get_stock_price(env: Env) -> Tool:
    def get_stock_price(symbol: Annotated[str, {"examples": ["ACME"]}]) -> dict[str, Any]:
        """Current share price of a stock in USD, e.g. "ACME" (demo data; the service is sometimes busy: then retry).

        Args:
            symbol: Ticker symbol such as "ACME", "GLOBEX", "INITECH" or "UMBRELLA".
        """
        # Fails on its first call in every episode: the model must read the error and call again.
        if env.calls.get("get_stock_price", 0) == 1:
            raise ConnectionError("quote service busy, please retry the same call")
        key = symbol.strip().upper()
        if key not in STOCKS:
            raise ValueError(f"unknown symbol {symbol[:20]!r}; known: {', '.join(STOCKS)}")
        return {"symbol": key, "price_usd": STOCKS[key]}

    return _from_function(env, get_stock_price)


def _convert_currency(env: Env) -> Tool:
    def convert_currency(amount: float, from_currency: Currency, to_currency: Currency) -> dict[str, Any]:
        """Convert money between currencies at fixed demo rates, e.g. {"amount": 100, "from_currency": "USD", "to_currency": "EUR"}.

        Args:
            amount: The amount of money to convert.
            from_currency: Currency code of the amount.
            to_currency: Currency code to convert to.
        """
        result = amount * RATES[from_currency] / RATES[to_currency]
        return {"amount": amount, "from": from_currency, "to": to_currency, "result": _tidy(result, 2)}

    return _from_function(env, convert_currency)


def _convert_units(env: Env) -> Tool:
    def convert_units(value: float, from_unit: Unit, to_unit: Unit) -> dict[str, Any]:
        """Convert a value between units of length, mass, volume or temperature, e.g. {"value": 5, "from_unit": "km", "to_unit": "mi"}.

        Args:
            value: The number to convert.
            from_unit: Unit of the value: km, m, mi, ft, kg, lb, l, gal, c (Celsius), f (Fahrenheit).
            to_unit: Unit to convert to (same kinds as from_unit).
        """
        dim_a, fa = _UNITS[from_unit]
        dim_b, fb = _UNITS[to_unit]
        if dim_a != dim_b:
            raise ValueError(f"cannot convert {dim_a} ({from_unit}) to {dim_b} ({to_unit})")
        if dim_a == "temperature":
            celsius = value if from_unit == "c" else (value - 32) * 5 / 9
            result = celsius if to_unit == "c" else celsius * 9 / 5 + 32
        else:
            assert fa is not None and fb is not None  # only temperatures have no factor
            result = value * fa / fb
        return {"value": value, "from_unit": from_unit, "to_unit": to_unit, "result": _tidy(result, 2)}

    return _from_function(env, convert_units)


def booking_code(restaurant: str, people: int, time: str) -> str:
    initials = "".join(w[0] for w in restaurant.upper().split() if w[:1].isalpha())[:3] or "X"
    return f"{initials}-{people}-{time.replace(':', '')}"


def _book_table(env: Env) -> Tool:
    def book_table(
        restaurant: str, people: int, time: Literal["18:00", "19:00", "20:00", "21:00"], outdoor: bool = False
    ) -> dict[str, Any]:
        """Book a restaurant table, e.g. {"restaurant": "Da Paolo", "people": 2, "time": "19:00"}; returns a confirmation code.

        Args:
            restaurant: Name of the restaurant.
            people: Number of guests (1-12).
            time: Time of the booking.
            outdoor: true for a table outside.
        """
        if not 1 <= people <= 12:
            raise ValueError(f"people must be between 1 and 12, got {people}")
        code = booking_code(restaurant, people, time)
        booking = {"restaurant": restaurant, "people": people, "time": time, "outdoor": outdoor, "confirmation": code}
        with env.lock:
            env.bookings.append(booking)
        return booking

    return _from_function(env, book_table)


def _get_forecast(env: Env) -> Tool:
    def get_forecast(city: str, days: int, unit: Literal["C", "F"] = "C") -> dict[str, Any]:
        """Weather forecast for the next days, e.g. {"city": "Paris", "days": 3, "unit": "C"} (demo data).

        Args:
            city: City name, e.g. "Paris".
            days: Number of days ahead, 1 to 7.
            unit: "C" for Celsius or "F" for Fahrenheit.
        """
        if not 1 <= days <= 7:
            raise ValueError(f"days must be between 1 and 7, got {days}")
        base = demo.get_weather(city)
        temps = [base["temp_c"] + d for d in range(1, days + 1)]
        if unit == "F":
            temps = [_tidy(t * 9 / 5 + 32, 1) for t in temps]
        return {"city": base["city"], "unit": unit, "daily_temps": temps, "condition": base["condition"]}

    return _from_function(env, get_forecast)


def _set_thermostat(env: Env) -> Tool:
    def set_thermostat(
        room: Literal["living room", "bedroom", "office", "kitchen"],
        temperature: float,
        mode: Literal["heat", "cool", "auto"] = "auto",
    ) -> str:
        """Set a room's thermostat, e.g. {"room": "bedroom", "temperature": 20.5, "mode": "heat"} (demo, in memory).

        Args:
            room: The room.
            temperature: Target temperature in Celsius (10-30).
            mode: heat, cool or auto.
        """
        if not 10 <= temperature <= 30:
            raise ValueError(f"temperature must be between 10 and 30 Celsius, got {temperature}")
        with env.lock:
            env.thermostats[room] = {"temperature": temperature, "mode": mode}
        return f"{room} thermostat set to {temperature:g} C ({mode})"

    return _from_function(env, set_thermostat)


def _is_prime(env: Env) -> Tool:
    def is_prime(n: int) -> bool:
        """Whether a whole number is prime, e.g. 13 -> true.

        Args:
            n: The number to test.
        """
        if abs(n) > 10**12:
            raise ValueError("n is too large (limit 10^12)")
        if n < 2:
            return False
        k = 2
        while k * k <= n:
            if n % k == 0:
                return False
            k += 1
        return True

    return _from_function(env, is_prime)


def _capital_of(env: Env) -> Tool:
    def capital_of(country: str) -> str:
        """The capital city of a country, e.g. "Japan" -> "Tokyo".

        Args:
            country: Country name in English.
        """
        key = country.strip().lower()
        if key not in CAPITALS:
            raise ValueError(f"no data for {country[:40]!r}; known: {', '.join(sorted(c.title() for c in CAPITALS))}")
        return CAPITALS[key]

    return _from_function(env, capital_of)


def _get_population(env: Env) -> Tool:
    def get_population(city: str) -> dict[str, Any]:
        """Population of a city (demo data, fixed values), e.g. "Lisbon".

        Args:
            city: City name.
        """
        key = " ".join(city.split(",")[0].lower().split())
        if key not in POPULATION:
            raise ValueError(f"no data for {city[:40]!r}; known: {', '.join(c.title() for c in POPULATION)}")
        return {"city": key.title(), "population": POPULATION[key]}

    return _from_function(env, get_population)


def _word_count(env: Env) -> Tool:
    def word_count(text: str) -> int:
        """Number of words in a text (split on whitespace), e.g. "hello big world" -> 3.

        Args:
            text: The text to count.
        """
        return len(text.split())

    return _from_function(env, word_count)


def _reverse_text(env: Env) -> Tool:
    def reverse_text(text: str) -> str:
        """The text written backwards, e.g. "abc" -> "cba".

        Args:
            text: The text to reverse.
        """
        return text[::-1]

    return _from_function(env, reverse_text)


# Long outputs: the useful part comes first; the rest is longer than the observation limit.
_FILLER = (
    "Section {n}. This paragraph is boilerplate kept for the length of the document: safety notes, "
    "legal text, storage advice and other details that do not matter for typical questions. "
)


def long_document(header: str, pages: int = 60) -> str:
    return header + "\n\n" + "\n".join(_FILLER.format(n=n) for n in range(1, pages + 1))


MANUALS = {
    "x200": "X200 drone manual. Key specifications: battery capacity 4200 mAh; flight time 31 minutes; "
    "weight 1.2 kg; maximum range 8 km.",
    "k9": "K9 kettle manual. Key specifications: capacity 1.7 litres; power 2200 W; boils 1 litre in 150 seconds.",
}


def _read_manual(env: Env) -> Tool:
    def read_manual(product: str) -> str:
        """The full user manual of a product (long text; key specifications come first), e.g. "X200".

        Args:
            product: Product name, e.g. "X200" or "K9".
        """
        key = product.lower().replace("drone", "").replace("kettle", "").strip()
        if key not in MANUALS:
            raise ValueError(f"no manual for {product[:40]!r}; known: X200, K9")
        return long_document(MANUALS[key])

    return _from_function(env, read_manual)


def _list_orders(env: Env) -> Tool:
    def list_orders(customer_id: str) -> list[dict[str, Any]]:
        """Every order of a customer, newest first (long list), e.g. "C-1001".

        Args:
            customer_id: Customer id like "C-1001".
        """
        if customer_id.strip().upper() != "C-1001":
            raise ValueError(f"unknown customer {customer_id[:20]!r}; try C-1001")
        orders = [{"order": "O-5000", "date": "2025-06-12", "total_eur": 59.9, "items": 3}]
        for n in range(1, 120):
            orders.append(
                {
                    "order": f"O-{5000 - n}",
                    "date": f"2024-{(n % 12) + 1:02d}-{(n % 27) + 1:02d}",
                    "total_eur": round(10 + (n * 7.3) % 90, 2),
                    "items": 1 + n % 5,
                }
            )
        return orders

    return _from_function(env, list_orders)


def _read_log(env: Env) -> Tool:
    def read_log(service: str) -> str:
        """Today's log of a service (long text; a summary line comes first), e.g. "payments".

        Args:
            service: Service name: "payments" or "search".
        """
        counts = {"payments": 17, "search": 3}
        key = service.strip().lower().replace(" service", "")
        if key not in counts:
            raise ValueError(f"unknown service {service[:40]!r}; known: payments, search")
        lines = [f"SUMMARY {key}: {counts[key]} errors, 4 warnings today"]
        lines += [
            f"2025-06-14T{h:02d}:{m:02d}:00 INFO {key} request handled in {(h * m) % 90 + 10} ms"
            for h in range(0, 12)
            for m in range(0, 60, 3)
        ]
        return "\n".join(lines)

    return _from_function(env, read_log)


# Distractors: plausible tools no task in the suite needs.
def _send_email(env: Env) -> Tool:
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email, e.g. {"to": "ana@example.com", "subject": "Hi", "body": "..."} (demo: nothing is sent).

        Args:
            to: Recipient address.
            subject: Subject line.
            body: Message text.
        """
        return f"email to {to} queued (demo)"

    return _from_function(env, send_email)


def _search_web(env: Env) -> Tool:
    def search_web(query: str) -> str:
        """Search the web for pages about a query (demo: offline, finds nothing).

        Args:
            query: What to search for.
        """
        return "no results (the demo search engine is offline)"

    return _from_function(env, search_web)


def _translate(env: Env) -> Tool:
    def translate(text: str, target_language: Literal["fr", "de", "es", "pt", "ja"]) -> str:
        """Translate a text into another language (demo: returns the text marked, not translated).

        Args:
            text: The text to translate.
            target_language: Language code.
        """
        return f"[{target_language}] {text}"

    return _from_function(env, translate)


def _get_news(env: Env) -> Tool:
    def get_news(topic: str) -> list[str]:
        """Latest news headlines on a topic (demo data).

        Args:
            topic: Topic such as "sports" or "tech".
        """
        return [f"{topic.title()}: nothing new today (demo headline)"]

    return _from_function(env, get_news)


def _create_event(env: Env) -> Tool:
    def create_calendar_event(title: str, date: str, time: str = "09:00") -> str:
        """Add an event to the calendar, e.g. {"title": "Dentist", "date": "2025-06-20", "time": "15:00"} (demo).

        Args:
            title: Event title.
            date: Date as YYYY-MM-DD.
            time: Time as HH:MM.
        """
        return f"event {title!r} on {date} at {time} created (demo)"

    return _from_function(env, create_calendar_event)


TOOL_BUILDERS: dict[str, Callable[[Env], Tool]] = {
    "calculate": _calculate,
    "get_weather": _get_weather,
    "multiply": _multiply,
    "get_time": _get_time,
    "toggle_light": _toggle_light,
    "get_stock_price": _get_stock_price,
    "convert_currency": _convert_currency,
    "convert_units": _convert_units,
    "book_table": _book_table,
    "get_forecast": _get_forecast,
    "set_thermostat": _set_thermostat,
    "is_prime": _is_prime,
    "capital_of": _capital_of,
    "get_population": _get_population,
    "word_count": _word_count,
    "reverse_text": _reverse_text,
    "read_manual": _read_manual,
    "list_orders": _list_orders,
    "read_log": _read_log,
    "send_email": _send_email,
    "search_web": _search_web,
    "translate": _translate,
    "get_news": _get_news,
    "create_calendar_event": _create_event,
}
