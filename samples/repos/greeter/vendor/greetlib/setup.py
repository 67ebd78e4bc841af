from setuptools import setup

setup(name="greetlib", version="1.0", packages=["greetlib"])
