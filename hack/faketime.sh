#!/usr/bin/env bash
# Unpacks libfaketime (Debian's package: a library preloaded to shift a process's wall
# clock) into ~/.cache/propagator/faketime/<version>/ (once) and prints the library's
# path. The shard tests run replicas whose clocks are seconds apart with it.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/propagator/faketime"
found=$(ls "$cache"/*/libfaketime.so.1 2>/dev/null | head -n 1 || true)
if [ -n "$found" ]; then
  echo "$found"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# apt-get download needs no root; its package lists may need one refresh (root only).
if ! apt-get download libfaketime >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update >/dev/null
  fi
  apt-get download libfaketime >/dev/null
fi
deb=$(ls libfaketime_*.deb)
version=$(dpkg-deb -f "$deb" Version)
dpkg-deb -x "$deb" unpacked
lib=$(find unpacked -name 'libfaketime.so.1' | head -n 1)
mkdir -p "$cache/$version"
cp "$lib" "$cache/$version/libfaketime.so.1"
echo "$cache/$version/libfaketime.so.1"
