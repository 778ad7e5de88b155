# Sourced by the scripts run on the device machine (scripts/*_check.sh, bench/experiments/*):
#   . scripts/device_env.sh
# The carried binaries were configured at /work/main (test data and CTest paths are absolute),
# so the repository is linked there when it runs elsewhere; cuBLAS 13 comes from the toolkit,
# or from the Python wheel when the toolkit has none (LD_LIBRARY_PATH).
if [ "$PWD" != /work/main ] && [ ! -e /work/main ]; then
  mkdir -p /work && ln -s "$PWD" /work/main
fi
loom_cublas=
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -e "$d/libcublas.so.13" ] && loom_cublas=$d && break
done
if [ -z "$loom_cublas" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcublas.so.13 '; then
  loom_cublas=$(dirname "$(find / -name 'libcublas.so.13' -path '*nvidia*' 2>/dev/null | head -1)")
fi
[ -n "$loom_cublas" ] && [ "$loom_cublas" != . ] &&
  export LD_LIBRARY_PATH="$loom_cublas:${LD_LIBRARY_PATH:-}"
unset loom_cublas d
# unpack_pack PACK [DIR]: a pack (scripts/pack_device.sh) unpacked into DIR (default: here) with
# python3, as the machine may lack xz; PACK is relative to the repository root.
unpack_pack() {
  mkdir -p "${2:-.}" &&
    python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
      "$1" "${2:-.}"
}
# sample_gpu DIR: the GPU's name, top SM clock and power limit into DIR/device.txt (and stdout),
# then SM clock, power and temperature every 500 ms into DIR/smi.csv in the background until the
# caller kills $smi (before packing DIR).
sample_gpu() {
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$1/device.txt"
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 \
    > "$1/smi.csv" 2>&1 &
  smi=$!
}
