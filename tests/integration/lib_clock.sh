# shellcheck shell=sh
# The faked clock's file operations, in POSIX sh so that both lib.sh (bash)
# and a psql session's \! (which runs sh) can source them. Why the offset is
# only seen from the next second boundary on: see "Faked clocks" in lib.sh.

# sleep_past_second_boundary: sleep until just after the next full second of
# the real clock. Every faked server process that reads its clock from then
# on re-reads the offset file first.
sleep_past_second_boundary() {
  _ms=$(date +%s%3N)
  sleep "$(printf '0.%03d' $(( (1000 - _ms % 1000) % 1000 )))"
  sleep 0.02
}

# clock_write FILE OFFSET: write a libfaketime offset (+0, -0.5, -1h) to a
# temporary file and rename it over FILE, so that a server reading FILE
# concurrently never sees it empty.
clock_write() {
  printf '%s\n' "$2" > "$1.tmp.$$"
  chmod 644 "$1.tmp.$$"
  mv -f "$1.tmp.$$" "$1"
}

# clock_set_behind FILE LAST_MS BEHIND_MS: after the next second boundary (so
# that a server process's next clock reading re-reads FILE), set the offset
# so that the faked clock reads BEHIND_MS before LAST_MS (ms since 1970), to
# the few ms it takes the caller to read the clock after this returns.
clock_set_behind() {
  sleep_past_second_boundary
  clock_write "$1" "$(awk -v o="$(( $2 - $3 - $(date +%s%3N) ))" 'BEGIN { printf "%.3f", o / 1000 }')"
}
