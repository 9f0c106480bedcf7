#!/usr/bin/env bash
# Release build: static drover binaries for linux/amd64 and linux/arm64,
# with the release's name, the git commit and its date stamped in (drover
# version prints them), and their SHA256SUMS.
#
#   dist/release.sh                    # version from `git describe`, into build/release
#   VERSION=v0.3.0 dist/release.sh     # a given version
#   OUT=/tmp/rel ARCHES=amd64 dist/release.sh
#
# Then the image (FROM scratch, the binary alone):
#   docker build -f dist/Dockerfile -t drover:v0.3.0 build/release
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-build/release}
ARCHES=${ARCHES:-"amd64 arm64"}
if [ -z "${VERSION:-}" ]; then
	# A tag when HEAD has one (v0.3.0), else the nearest tag and the
	# commits since it (v0.3.0-4-gabc1234), else the commit alone; -dirty
	# for uncommitted changes.
	VERSION=$(git describe --tags --always --dirty 2>/dev/null || true)
fi
if [ -z "$VERSION" ]; then
	echo "release: no VERSION given and git describe found none: run inside the git checkout, or set VERSION=v1.2.3" >&2
	exit 1
fi
case "$VERSION" in
*[!A-Za-z0-9._+-]*)
	echo "release: VERSION \"$VERSION\" has characters other than letters, digits and . _ + -" >&2
	exit 1
	;;
esac

# The commit, its date and whether the tree has uncommitted changes, as
# drover version prints them (stamped, since the Go toolchain records
# nothing in a git worktree or with GOFLAGS=-buildvcs=false).
COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)
COMMIT_DATE=$(git show -s --format=%cI HEAD 2>/dev/null || echo unknown)
MODIFIED=false
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
	MODIFIED=true
fi

mkdir -p "$OUT"
rm -f "$OUT"/drover-linux-* "$OUT"/SHA256SUMS
for arch in $ARCHES; do
	case "$arch" in
	amd64 | arm64) ;;
	*)
		echo "release: unknown architecture \"$arch\" in ARCHES: use amd64 and/or arm64" >&2
		exit 1
		;;
	esac
	# CGO_ENABLED=0: static, so the binary runs on any Linux and in a
	# FROM scratch image. -trimpath: no build machine paths inside.
	CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT -X main.commitDate=$COMMIT_DATE -X main.modified=$MODIFIED" \
		-o "$OUT/drover-linux-$arch" ./cmd/drover
	echo "built $OUT/drover-linux-$arch"
done
(cd "$OUT" && sha256sum drover-linux-* >SHA256SUMS)
echo "$VERSION" >"$OUT/VERSION"
echo "wrote $OUT/SHA256SUMS (check with: cd $OUT && sha256sum -c SHA256SUMS)"
