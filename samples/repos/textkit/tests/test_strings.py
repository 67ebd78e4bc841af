import pytest

from textkit import strings as s


def test_snake_case_from_camel():
    assert s.snake_case("parseHTTPResponse") == "parse_http_response"


def test_snake_case_from_words():
    assert s.snake_case("Hello big World") == "hello_big_world"


def test_camel_case():
    assert s.camel_case("user_id_list") == "userIdList"
    assert s.camel_case("") == ""


def test_kebab_case():
    assert s.kebab_case("MaxRetryCount") == "max-retry-count"


def test_slugify_accents_and_punctuation():
    assert s.slugify("Crème Brûlée, 2 ways!") == "creme-brulee-2-ways"


def test_slugify_custom_separator():
    assert s.slugify("Hello World", sep="_") == "hello_world"


def test_truncate_short_text_unchanged():
    assert s.truncate("short", 10) == "short"


def test_truncate_long_text():
    assert s.truncate("The quick brown fox", 12) == "The quick..."


def test_truncate_rejects_negative_width():
    with pytest.raises(ValueError):
        s.truncate("x", -1)


def test_wrap_greedy():
    assert s.wrap("the quick brown fox jumps", 10) == ["the quick", "brown fox", "jumps"]


def test_wrap_long_word_alone():
    assert s.wrap("a extraordinarily b", 5) == ["a", "extraordinarily", "b"]


def test_count_words():
    assert s.count_words("It's a dog's life, isn't it?") == 6


def test_is_palindrome():
    assert s.is_palindrome("A man, a plan, a canal: Panama")
    assert not s.is_palindrome("palindrome")


def test_normalize_space():
    assert s.normalize_space("  a \t b\n\nc  ") == "a b c"


def test_initials():
    assert s.initials("ada king lovelace") == "AKL"


@pytest.mark.parametrize("word,count,expected", [
    ("cat", 1, "cat"), ("cat", 2, "cats"), ("box", 3, "boxes"),
    ("city", 0, "cities"), ("day", 2, "days"),
])
def test_pluralize(word, count, expected):
    assert s.pluralize(word, count) == expected


def test_levenshtein():
    assert s.levenshtein("kitten", "sitting") == 3
    assert s.levenshtein("", "abc") == 3
    assert s.levenshtein("same", "same") == 0


def test_rot13_round_trip():
    assert s.rot13("Hello, World!") == "Uryyb, Jbeyq!"
    assert s.rot13(s.rot13("Round Trip")) == "Round Trip"
