#!/bin/sh
# check_trace.sh PORT FILE...: checks pcap files with tshark: every IPv4, UDP,
# TCP and ICMP checksum good, no malformed packet. UDP port PORT carries test
# data, which tshark must not take for the protocol registered on it. Exit 77
# (ctest's skip) when tshark is not installed.
command -v tshark >/dev/null 2>&1 || { echo "tshark is not installed: skipped"; exit 77; }
port=$1
shift
status=0
for file in "$@"; do
  if [ ! -s "$file" ]; then
    echo "$file: missing or empty"
    status=1
    continue
  fi
  # checksum.status: 1 good, 0 bad, 2 unverified (the UDP header an ICMP
  # error quotes cannot be: the datagram behind it is cut).
  bad=$(tshark -r "$file" -d "udp.port==$port,data" -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE \
          -o tcp.check_checksum:TRUE -T fields \
          -e ip.checksum.status -e udp.checksum.status -e tcp.checksum.status -e icmp.checksum.status 2>/dev/null | grep -c '0')
  errors=$(tshark -r "$file" -d "udp.port==$port,data" -q -z expert,error 2>/dev/null | grep -c 'Errors')
  packets=$(tshark -r "$file" -d "udp.port==$port,data" 2>/dev/null | wc -l)
  echo "$file: $packets packets, $bad with a bad checksum, $errors expert error reports"
  if [ "$packets" -eq 0 ] || [ "$bad" -ne 0 ] || [ "$errors" -ne 0 ]; then status=1; fi
done
exit $status
