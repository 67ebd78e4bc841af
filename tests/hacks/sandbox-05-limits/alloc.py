# Case 5 of issue 16: memory beyond the limit, one page at a time.
x = bytearray(512 << 20)
x[::4096] = b"x" * len(x[::4096])
print("survived")
