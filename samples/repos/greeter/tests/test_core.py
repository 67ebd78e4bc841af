import greetlib

from greeter import farewell, roll_call, welcome


def test_greetlib_is_the_vendored_one():
    assert greetlib.__version__ == "1.0"


def test_welcome():
    assert welcome("ada lovelace") == "Hello, Ada Lovelace!"


def test_welcome_strips():
    assert welcome("  grace  ") == "Hello, Grace!"


def test_farewell():
    assert farewell("alan") == "Bye, Alan!"


def test_farewell_formal():
    assert farewell("alan turing", formal=True) == "Farewell, Alan Turing."


def test_roll_call():
    assert roll_call(["bob", "Alice"]) == "Hello, Alice!\nHello, Bob!"
