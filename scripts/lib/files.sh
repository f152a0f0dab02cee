# Writing generated files that something may be reading at the same moment; sourced.
#
# The tests run the build scripts to be sure nothing is stale (tests/lib.rs's `run_script`), on
# several threads, while other tests read what the scripts wrote: `npm pack` reads core/pkg/, a
# running Worker serves edge-api/public/pkg/. A script that rewrote an unchanged file in place
# (`cp`, `cat >`) let a reader meet it empty: a CI run's `npm pack` found core/pkg/package.json
# with no JSON in it. So a file is replaced only when its content changes, and then whole: it is
# written beside its destination and renamed over it, which readers see at once or not at all.

# write_if_changed DESTINATION: DESTINATION holds what is on standard input, unless it already does.
write_if_changed() {
  local destination=$1 partial="$1.partial.$$"
  cat >"$partial"
  if cmp -s "$partial" "$destination"; then
    rm -f "$partial"
  else
    mv -f "$partial" "$destination"
  fi
}

# install_if_changed SOURCE DESTINATION: DESTINATION (a file's path) becomes a copy of SOURCE,
# unless it already is one (compared first, so an unchanged file is not even copied).
install_if_changed() {
  cmp -s "$1" "$2" || write_if_changed "$2" <"$1"
}
