# Sourced by the bootstrap scripts: Debian trixie packages (newer than the machine's release) unpacked into a
# directory of ours with a private apt state; the system's apt setup is untouched.

# The machine's Debian mirror (empty when it names none).
trixie_mirror() { awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true; }

# unpack_trixie WORKDIR DEST PKG...: download PKG... from trixie (apt state in WORKDIR, removed after) and unpack
# them into DEST.
unpack_trixie() {
  local A=$1 P=$2 mirror d
  shift 2
  rm -rf "$A"; mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/debs"
  mirror=$(trixie_mirror)
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${mirror:-http://deb.debian.org/debian} trixie main" \
    > "$A/sources.list"
  local APT=(-o "Dir::State::Lists=$A/lists" -o "Dir::Etc::SourceList=$A/sources.list"
             -o Dir::Etc::SourceParts=/nonexistent -o "Dir::Cache=$A/cache" -o APT::Sandbox::User=root)
  apt-get "${APT[@]}" -qq update
  (cd "$A/debs" && apt-get "${APT[@]}" -qq download "$@")
  for d in "$A"/debs/*.deb; do dpkg-deb -x "$d" "$P"; done
  rm -rf "$A"
}
