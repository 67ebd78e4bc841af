#!/bin/sh
# commit.sh DIR: make DIR a git repository with one reproducible commit of
# everything in it (fixed author and date, so commit and tree ids are the
# same on every machine).  The tests and the demo use it on copies of the
# sample repositories.
set -eu
[ $# -eq 1 ] || { echo "usage: commit.sh DIR" >&2; exit 2; }
git -C "$1" init -q -b main
git -C "$1" add -A
GIT_AUTHOR_NAME=sample GIT_AUTHOR_EMAIL=sample@example.org \
GIT_COMMITTER_NAME=sample GIT_COMMITTER_EMAIL=sample@example.org \
GIT_AUTHOR_DATE=2024-01-01T00:00:00Z GIT_COMMITTER_DATE=2024-01-01T00:00:00Z \
  git -C "$1" commit -q -m "initial import"
