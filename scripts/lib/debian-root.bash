# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Sourced by scripts/onnx-fixtures and scripts/check-toolchain: a minimal Debian root made with
# debootstrap from this machine's own apt sources, packages installed into it, commands run in it
# with folders of the host bound in, and every mount undone on exit. Needs root (debootstrap,
# chroot, mount) and the Debian archive.
#
#   debian_root NAME     trixie (Debian 13) or sid (Debian testing: debootstrap's sid script, suite
#                        'testing' where the mirror serves it, else 'sid'); roots live in
#                        $KTEN_ROOTS/NAME (default: roots/ beside the repository), made once: delete
#                        one to make it anew. Sets $rootfs and $roots.
#   root_install PKG...  installs what is missing (PKG/unstable takes it from unstable, added on
#                        demand at a low priority); a package the suite lacks is said and skipped
#   in_root CMD...       runs CMD in the root with a clean environment
#   root_bind DIR PATH   binds the host's DIR at PATH inside the root until exit

root_script=$(basename "$0")
[ "$(id -u)" = 0 ] || { echo "$root_script: needs root (debootstrap, chroot, mount)" >&2; exit 1; }

root_mounts=()
root_cleanup() {
  local i
  for ((i = ${#root_mounts[@]} - 1; i >= 0; i--)); do umount "${root_mounts[i]}" || true; done
}
trap root_cleanup EXIT

in_root() { chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  DEBIAN_FRONTEND=noninteractive PYTHONDONTWRITEBYTECODE=1 "$@"; }

root_bind() {
  mkdir -p "$rootfs$2"
  mount --bind "$1" "$rootfs$2"
  root_mounts+=("$rootfs$2")
}

root_mount_proc() {
  if ! mountpoint -q "$rootfs/proc"; then
    mount -t proc proc "$rootfs/proc"
    root_mounts+=("$rootfs/proc")
  fi
}

debian_root() {
  local name=$1 suites
  case "$name" in
    trixie) suites=(trixie) ;;
    sid) suites=(testing sid) ;;
    *) echo "$root_script: say trixie or sid, not '$name'" >&2; exit 2 ;;
  esac
  local repo
  repo=$(cd "$(dirname "$0")/.." && pwd)
  roots=${KTEN_ROOTS:-$(dirname "$repo")/roots}
  rootfs="$roots/$name"
  if [ ! -e "$rootfs/.ready" ]; then
    mkdir -p "$roots"
    if [ ! -x "$rootfs/bin/bash" ]; then
      command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
      local codename mirror made= suite
      codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
      mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk -v c="$codename" '$2 == c { print $1; exit }')
      [ -n "$mirror" ] || { echo "$root_script: no configured apt source serves Debian '$codename'" >&2; exit 1; }
      for suite in "${suites[@]}"; do
        echo "$root_script: debootstrap --variant=minbase $suite into $rootfs (script: $name)"
        rm -rf "$rootfs"
        if debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" "/usr/share/debootstrap/scripts/$name" \
            >"$roots/$name.debootstrap.log" 2>&1; then
          made=$suite
          break
        fi
        tail -3 "$roots/$name.debootstrap.log" >&2
      done
      [ -n "$made" ] || { echo "$root_script: debootstrap failed, see $roots/$name.debootstrap.log" >&2; exit 1; }
    fi
    # testing's and sid's Release files expire within days; a mirror may serve an older one
    [ "$name" = trixie ] || echo 'Acquire::Check-Valid-Until "false";' >"$rootfs/etc/apt/apt.conf.d/99kten-roots"
    root_mount_proc
    in_root apt-get update -q >"$roots/$name.apt.log" 2>&1 || { tail "$roots/$name.apt.log" >&2; exit 1; }
    touch "$rootfs/.ready"
  fi
  root_mount_proc
}

# Unstable beside the root's own suite, at priority 100: only what is named PKG/unstable comes from it.
root_add_unstable() {
  [ -e "$rootfs/etc/apt/sources.list.d/unstable.list" ] && return
  local mirror
  mirror=$(in_root apt-get indextargets --format '$(REPO_URI)' | head -1)
  echo "deb $mirror unstable main" >"$rootfs/etc/apt/sources.list.d/unstable.list"
  printf 'Package: *\nPin: release a=unstable\nPin-Priority: 100\n' >"$rootfs/etc/apt/preferences.d/unstable"
  in_root apt-get update -q >>"$roots/$(basename "$rootfs").apt.log" 2>&1 || { tail "$roots/$(basename "$rootfs").apt.log" >&2; exit 1; }
}

root_install() {
  local log p policy wanted=()
  log="$roots/$(basename "$rootfs").apt.log"
  for p in "$@"; do
    # installed already: no apt run (its solver takes minutes on a loaded machine)
    [ "$(in_root dpkg-query -W -f '${Status}' "${p%/*}" 2>/dev/null)" = "install ok installed" ] && continue
    [[ "$p" == */unstable ]] && root_add_unstable
    policy=$(in_root apt-cache policy "${p%/*}")  # (grep -q in a pipe would end it early: pipefail)
    if grep -q 'Candidate: [0-9]' <<<"$policy"; then
      wanted+=("$p")
    else
      echo "$root_script: Debian $(basename "$rootfs") has no package ${p%/*}: going on without it" >&2
    fi
  done
  [ ${#wanted[@]} = 0 ] && return
  in_root apt-get install -y -q --no-install-recommends "${wanted[@]}" >>"$log" 2>&1 || { tail "$log" >&2; exit 1; }
  in_root apt-get clean
}
