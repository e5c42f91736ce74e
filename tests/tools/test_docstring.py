"""textagent.tools.docstring: a docstring's description and parameter texts, in the three styles."""

from __future__ import annotations

import pytest

from textagent.tools.docstring import parse_docstring

GOOGLE = """Book a table at a restaurant.

    Picks the first free slot.

    Args:
        restaurant (str): The restaurant's name,
            as it is listed.
        people: How many guests.
        **extras: Anything else.

    Returns:
        A booking code.

    Raises:
        ValueError: when no slot is free.
    """

REST = """Convert an amount between currencies.

    :param float amount: How much, in the source currency.
    :param source: ISO code of the source currency,
        e.g. EUR.
    :type source: str
    :returns: the converted amount
    :raises KeyError: unknown currency
    """

NUMPY = """Count the words of a text.

    Parameters
    ----------
    text : str
        The text to count,
        in any language.
    min_length : int, optional
        Shorter words are left out.

    Returns
    -------
    int
        The number of words.
    """


def test_google_style():
    description, params = parse_docstring(GOOGLE)
    assert description == "Book a table at a restaurant. Picks the first free slot."
    assert params == {
        "restaurant": "The restaurant's name, as it is listed.",
        "people": "How many guests.",
        "extras": "Anything else.",
    }


def test_rest_style():
    description, params = parse_docstring(REST)
    assert description == "Convert an amount between currencies."
    assert params == {
        "amount": "How much, in the source currency.",
        "source": "ISO code of the source currency, e.g. EUR.",
    }


def test_numpy_style():
    description, params = parse_docstring(NUMPY)
    assert description == "Count the words of a text."
    assert params == {"text": "The text to count, in any language.", "min_length": "Shorter words are left out."}


@pytest.mark.parametrize("doc", [None, "", "   \n  "])
def test_no_docstring(doc):
    assert parse_docstring(doc) == ("", {})


def test_description_only():
    assert parse_docstring("Say hello.\n\nTwice if asked.") == ("Say hello. Twice if asked.", {})


def test_text_dedented_after_the_args_section_is_not_a_parameter():
    doc = """Do it.

    Args:
        x: The x.
    Trailing words at the margin.
    """
    assert parse_docstring(doc) == ("Do it.", {"x": "The x."})


def test_other_sections_are_left_out():
    doc = """Do it.

    Examples:
        >>> do(1)
    Note:
        y: not a parameter.
    """
    assert parse_docstring(doc) == ("Do it.", {})


def test_a_parameter_without_text_is_left_out():
    doc = """Do it.

    Args:
        x:
        y: The y.
    """
    assert parse_docstring(doc) == ("Do it.", {"y": "The y."})


def test_numpy_other_parameters_section_counts_and_returns_does_not():
    doc = """Do it.

    Other Parameters
    ----------------
    z : int
        The z.

    Returns
    -------
    w : int
        Not a parameter.
    """
    assert parse_docstring(doc) == ("Do it.", {"z": "The z."})
