#!/bin/sh
# check_via_trace.sh DISSECTOR VIARUN PROVIDER OUTDIR am|mpi PROGRAM COUNT [DEFERRED]
#
# Runs PROGRAM on 2 ranks through viarun with VIASTACK_TRACE=via:OUTDIR/KIND-PROVIDER.pcap,
# then decodes each rank's trace with tshark and the Lua DISSECTOR and checks
# what the program is known to have sent:
#   am:  COUNT requests to handler 5 sent by rank 0 and received by rank 1,
#        COUNT replies to handler 6 back, DEFERRED requests to handler 7 in
#        bundles, an 8 KiB store whole in one message, an RDMA write (the
#        64 KiB store) and an RDMA read (the get)
#   mpi: COUNT eager messages of 100 bytes with tag 42 sent and received,
#        each in a frame of the mesh's 8-byte header, MPI's 16-byte eager
#        header and the data, one rendezvous request (tag 43) and the
#        receiver's RDMA read of it
# and, in both, the connection's events and no malformed record. Exit 77
# (ctest's skip) when tshark is not installed.
set -u
command -v tshark >/dev/null 2>&1 || { echo "tshark is not installed: skipped"; exit 77; }
dissector=$1 viarun=$2 provider=$3 outdir=$4 kind=$5 program=$6 count=$7 deferred=${8:-0}

mkdir -p "$outdir"
base=$outdir/$kind-$provider
rm -f "$base".rank0.pcap* "$base".rank1.pcap*
if [ "$kind" = am ]; then args="$count $deferred"; else args=$count; fi
# shellcheck disable=SC2086
VIASTACK_TRACE="via:$base.pcap" "$viarun" -n 2 --provider "$provider" --timeout 60 -- "$program" $args || {
  echo "the traced program failed"
  exit 1
}

status=0
check() {  # check WHAT EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then
    echo "ok: $1: $3"
  else
    echo "FAILED: $1: expected $2, found $3"
    status=1
  fi
}
at_least() {  # at_least WHAT MINIMUM ACTUAL
  if [ "$3" -ge "$2" ]; then
    echo "ok: $1: $3"
  else
    echo "FAILED: $1: expected at least $2, found $3"
    status=1
  fi
}

# One line per record, decoded once per file: event;service;frame type;AM kind;AM handler;
# bundle item handlers;MPI type;MPI tag;frame length;MPI message bytes
decode() {
  tshark -X lua_script:"$dissector" -r "$1" -T fields -E separator=';' -E occurrence=a -E aggregator=, \
    -e viastack.event -e viastack.service -e viastack.frame.type -e viastack_am.kind -e viastack_am.handler \
    -e viastack_am.item.handler -e viastack_mpi.type -e viastack_mpi.tag -e viastack.frame.length \
    -e viastack_mpi.size >"$1.fields"
}
fields() { cat "$1.fields"; }
# count FILE AWK-CONDITION: records for which the condition holds.
count() { fields "$1" | awk -F';' "$2 { n++ } END { print n + 0 }"; }
# items FILE EVENT HANDLER: bundle items for HANDLER in records of EVENT.
items() {
  fields "$1" | awk -F';' -v event="$2" -v handler="$3" \
    '$1 == event { k = split($6, h, ","); for (i = 1; i <= k; i++) if (h[i] == handler) n++ } END { print n + 0 }'
}

r0=$base.rank0.pcap
r1=$base.rank1.pcap
for file in "$r0" "$r1"; do
  [ -s "$file" ] || { echo "FAILED: $file is missing or empty"; exit 1; }
  decode "$file"
  records=$(count "$file" '$1 != ""')
  at_least "$file: records decoded as viastack" 1 "$records"
  malformed=$(tshark -X lua_script:"$dissector" -r "$file" -q -z expert,error 2>/dev/null | grep -c 'Errors')
  check "$file: expert error reports (malformed records)" 0 "$malformed"
  # Events 10: connected.
  at_least "$file: connections up" 1 "$(count "$file" '$1 == 10')"
done
# Events 5: connect request, 7: a request arrived, 8: accepted, 9: rejected. When both ranks
# ask at once, the lower one rejects the other's request, which withdraws its own and accepts.
in_both() { echo $(($(count "$r0" "$1") + $(count "$r1" "$1"))); }
at_least "connect requests" 1 "$(in_both '$1 == 5')"
check "accepted requests" 1 "$(in_both '$1 == 8')"
check "requests arrived, each accepted or rejected" "$(in_both '$1 == 7')" "$(in_both '$1 == 8 || $1 == 9')"

# Events 1: frame sent, 2: frame received, 4: RDMA read by single copy. Frame types 2: RDMA write, 3: read request.
if [ "$kind" = am ]; then
  check "AM requests to handler 5 sent by rank 0" "$count" "$(count "$r0" '$1 == 1 && $2 == "am" && $4 == 1 && $5 == 5')"
  check "AM requests to handler 5 received by rank 1" "$count" "$(count "$r1" '$1 == 2 && $2 == "am" && $4 == 1 && $5 == 5')"
  check "AM replies to handler 6 sent by rank 1" "$count" "$(count "$r1" '$1 == 1 && $4 == 2 && $5 == 6')"
  check "AM replies to handler 6 received by rank 0" "$count" "$(count "$r0" '$1 == 2 && $4 == 2 && $5 == 6')"
  check "bundled requests to handler 7 sent by rank 0" "$deferred" "$(items "$r0" 1 7)"
  check "bundled requests to handler 7 received by rank 1" "$deferred" "$(items "$r1" 2 7)"
  at_least "bundles sent by rank 0" 1 "$(count "$r0" '$1 == 1 && $4 == 9')"
  # A store_done frame of the header, 3 arguments and 8 KiB.
  check "AM whole stores of 8 KiB sent by rank 0" 1 "$(count "$r0" '$1 == 1 && $4 == 4 && $9 == 16 + 24 + 8192')"
  check "AM whole stores of 8 KiB received by rank 1" 1 "$(count "$r1" '$1 == 2 && $4 == 4 && $9 == 16 + 24 + 8192')"
  at_least "RDMA write frames sent by rank 0 (the 64 KiB store)" 1 "$(count "$r0" '$1 == 1 && $3 == 2')"
  at_least "RDMA write frames received by rank 1" 1 "$(count "$r1" '$1 == 2 && $3 == 2')"
  at_least "RDMA reads by rank 0 (the get: read requests or single copy)" 1 \
    "$(count "$r0" '($1 == 1 && $3 == 3) || $1 == 4')"
else
  check "MPI eager messages with tag 42 sent by rank 0" "$count" "$(count "$r0" '$1 == 1 && $2 == "mpi" && $7 == 0 && $8 == 42')"
  check "MPI eager messages with tag 42 received by rank 1" "$count" "$(count "$r1" '$1 == 2 && $2 == "mpi" && $7 == 0 && $8 == 42')"
  check "MPI eager messages with tag 42 of 100 bytes in frames of 8 + 16 + 100 bytes" "$count" \
    "$(count "$r0" '$1 == 1 && $7 == 0 && $8 == 42 && $9 == 124 && $10 == 100')"
  check "MPI rendezvous requests with tag 43 sent by rank 0" 1 "$(count "$r0" '$1 == 1 && $7 == 1 && $8 == 43')"
  at_least "RDMA reads by rank 1 (the rendezvous: read requests or single copy)" 1 \
    "$(count "$r1" '($1 == 1 && $3 == 3) || $1 == 4')"
fi
exit $status
