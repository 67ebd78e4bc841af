# Case 3 of issue 16: inside the workspace, a copy of id(1) 300 directories
# deep, made set-user-ID.  Before the fix the scrub stopped at depth 256 and
# the file, owned by the host's root, kept its bit.
import os
import shutil

for _ in range(300):
    os.mkdir("d")
    os.chdir("d")
shutil.copy("/usr/bin/id", "id")
os.chmod("id", 0o4755)
print(oct(os.stat("id").st_mode & 0o7777))
