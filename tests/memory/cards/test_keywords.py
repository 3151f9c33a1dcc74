"""Keywords from recent text: identifiers of every spelling, code spans, acronyms, quoted strings; common words left out."""

from __future__ import annotations

from memory.cards.keywords import keywords_from, parts_of


def test_each_kind_of_keyword_is_found() -> None:
    text = (
        'The CardIndex calls load_config() in config.schema; see `ruyi cards search` and the "knowledge cards" folder. '
        "WAL mode on SQLite, httpClient retries, MAX_INJECT stays 3. 他说「知识卡片」很好."
    )
    found = keywords_from([text])
    for word in (
        "CardIndex",
        "load_config",
        "config.schema",
        "ruyi cards search",
        "knowledge cards",
        "WAL",
        "SQLite",
        "httpClient",
        "MAX_INJECT",
        "知识卡片",
    ):
        assert word in found, word


def test_common_words_numbers_and_plain_prose_are_not_keywords() -> None:
    assert keywords_from(["the answer is OK and it is 42, yes we did it"]) == []


def test_the_most_frequent_come_first_and_the_limit_holds() -> None:
    found = keywords_from(["FooBar once", "BazQux BazQux twice", "BazQux"], limit=1)
    assert found == ["BazQux"]
    assert keywords_from([" ".join(f"Name{i}Thing" for i in range(100))], limit=10) == [f"Name{i}Thing" for i in range(10)]


def test_case_differences_are_one_keyword() -> None:
    assert keywords_from(["SQLite sqlite SQLITE"]) == ["SQLite"]


def test_compound_keywords_split_into_their_words() -> None:
    assert parts_of("CardIndex") == ["card", "index"]
    assert parts_of("max_inject") == ["max", "inject"]
    assert parts_of("JSONDecodeError") == ["json", "decode", "error"]
    assert parts_of("sqlite") == []


def test_apostrophes_abbreviations_and_hex_numbers_are_no_keywords() -> None:
    assert keywords_from(["don't touch it, it's fine, e.g. later; the value 0x1F is set"]) == []
    assert keywords_from(["set it to 'strict mode' now"]) == ["strict mode"]
