"""Debian's mpi4py (built against Open MPI) on viastack's libmpi.so.40 (issue 18):
object and buffer point-to-point, matched probe, the collectives, Split and an
intercommunicator between the halves, Dup with attributes, the predefined
attributes, non-blocking collectives, one-sided communication (Win.Allocate
with passive target, Win.Create over a bytearray).
Run by mpi4py.sh."""
import array
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"rank {rank}: check failed: {what}", file=sys.stderr)


check("viastack" in MPI.Get_library_version(), "the library is viastack's: " + MPI.Get_library_version())
check(not comm.Is_inter(), "COMM_WORLD is an intracommunicator")
check(comm.Get_attr(MPI.TAG_UB) >= 32767, "MPI_TAG_UB")
check(comm.Get_attr(MPI.UNIVERSE_SIZE) >= size, "MPI_UNIVERSE_SIZE")

# Objects around a ring (pickled; recv of an object probes the message's size).
right, left = (rank + 1) % size, (rank - 1) % size
payload = {"from": rank, "data": list(range(rank * 10)), "text": "x" * (rank * 5000)}
request = comm.isend(payload, dest=right, tag=7)
got = comm.recv(source=left, tag=7)
request.wait()
check(got == {"from": left, "data": list(range(left * 10)), "text": "x" * (left * 5000)}, "object ring")
got = comm.sendrecv(("pair", rank), dest=right, source=left)
check(got == ("pair", left), "sendrecv of an object")

# Buffers: a large one (rendezvous) and a small one.
for count in (5, 40000):
    out = array.array("i", [rank * count + i for i in range(count)])
    into = array.array("i", [0]) * count
    comm.Sendrecv(out, dest=right, sendtag=count, recvbuf=into, source=left, recvtag=count)
    check(into == array.array("i", [left * count + i for i in range(count)]), f"Sendrecv of {count} ints")

# Matched probe: every other rank sends rank 0 an object; each is received once.
if rank == 0:
    seen = []
    for _ in range(size - 1):
        message = comm.mprobe(source=MPI.ANY_SOURCE, tag=11)
        seen.append(message.recv())
    check(sorted(seen) == [("hello", r) for r in range(1, size)], "mprobe/mrecv from every rank once")
else:
    comm.send(("hello", rank), dest=0, tag=11)

# Collectives.
check(comm.bcast({"root": "says"} if rank == 0 else None, root=0) == {"root": "says"}, "bcast of an object")
check(comm.allreduce(rank) == size * (size - 1) // 2, "allreduce of an object")
check(comm.allgather(rank) == list(range(size)), "allgather of objects")
check(comm.gather(rank * 2, root=0) == ([r * 2 for r in range(size)] if rank == 0 else None), "gather")
check(comm.scatter([r + 100 for r in range(size)] if rank == 0 else None, root=0) == rank + 100, "scatter")
check(comm.alltoall([(rank, r) for r in range(size)]) == [(r, rank) for r in range(size)], "alltoall")
total = array.array("d", [0.0])
comm.Allreduce(array.array("d", [rank + 0.5]), total, op=MPI.SUM)
check(total[0] == sum(r + 0.5 for r in range(size)), "Allreduce of a buffer")
check(comm.scan(1) == rank + 1, "scan")
comm.Barrier()

# Split: even and odd ranks, ordered by descending rank.
half = comm.Split(color=rank % 2, key=-rank)
members = half.allgather(rank)
check(members == sorted([r for r in range(size) if r % 2 == rank % 2], reverse=True), "Split's members and order")
# An intercommunicator between the halves (their leaders: the highest even and odd ranks).
if size > 1:
    others = [r for r in range(size) if r % 2 != rank % 2]
    inter = half.Create_intercomm(0, comm, max(others), tag=5)
    check(inter.Is_inter() and inter.Get_remote_size() == len(others), "Create_intercomm")
    check(inter.allgather(rank) == sorted(others, reverse=True), "allgather of objects on an intercommunicator")
    remote_sum = array.array("i", [0])
    inter.Allreduce(array.array("i", [rank]), remote_sum, op=MPI.SUM)
    check(remote_sum[0] == sum(others), "Allreduce on an intercommunicator")
    inter.Free()
half.Free()

# Dup with attributes: a keyval whose copy callback adds one, a delete callback that counts.
deleted = []
keyval = MPI.Comm.Create_keyval(copy_fn=lambda old, k, value: value + 1,
                                delete_fn=lambda c, k, value: deleted.append(value))
comm.Set_attr(keyval, 41)
dup = comm.Dup()
check(dup.Get_attr(keyval) == 42, "the copy callback ran on Dup")
check(dup.Get_attr(MPI.TAG_UB) == comm.Get_attr(MPI.TAG_UB), "predefined attributes on a duplicate")
# (Upper case: mpi4py's object collectives would make, and cache, a duplicate of their own.)
ones = array.array("i", [0])
dup.Allreduce(array.array("i", [1]), ones, op=MPI.SUM)
check(ones[0] == size, "the duplicate works")
dup.Free()
check(deleted == [42], "the delete callback ran on Free")
comm.Delete_attr(keyval)
check(deleted == [42, 41], "the delete callback ran on Delete_attr")
MPI.Comm.Free_keyval(keyval)

# Non-blocking collectives, outstanding together with point-to-point, retired by one Waitall;
# then one retired by polling Test. (mpi4py keeps no reference to the buffers: they
# must live in variables until the requests complete.)
word = array.array("i", [1234 if rank == 0 else 0])
addend, summed = array.array("d", [rank + 0.25]), array.array("d", [0.0])
mine_x3, everyone = array.array("i", [rank * 3]), array.array("i", [0]) * size
outgoing, exchanged = array.array("i", [rank * 100 + r for r in range(size)]), array.array("i", [0]) * size
ring_out, ring_in = array.array("i", [rank]), array.array("i", [-1])
requests = [comm.Ibarrier(),
            comm.Iallreduce(addend, summed, op=MPI.SUM),
            comm.Ibcast(word, root=0),
            comm.Iallgather(mine_x3, everyone),
            comm.Ialltoall(outgoing, exchanged),
            comm.Irecv(ring_in, source=left, tag=21),
            comm.Isend(ring_out, dest=right, tag=21)]
MPI.Request.Waitall(requests)
check(summed[0] == sum(r + 0.25 for r in range(size)), "Iallreduce")
check(word[0] == 1234, "Ibcast")
check(list(everyone) == [r * 3 for r in range(size)], "Iallgather")
check(list(exchanged) == [r * 100 + rank for r in range(size)], "Ialltoall")
check(ring_in[0] == left, "point-to-point alongside non-blocking collectives")
term, prefix = array.array("i", [rank + 1]), array.array("i", [0])
request = comm.Iscan(term, prefix, op=MPI.SUM)
while not request.Test():
    pass
check(prefix[0] == (rank + 1) * (rank + 2) // 2, "Iscan completed by Test")

# One-sided, passive target on a window of MPI_Win_allocate: each rank puts its rank
# into its right neighbour's slot 0, adds 1 to rank 0's slot 1, and takes a ticket
# from rank 0's slot 2 (Fetch_and_op); after Unlock every update is there.
item = MPI.INT.Get_size()
win = MPI.Win.Allocate(4 * item, disp_unit=item, comm=comm)
check(win.Get_attr(MPI.WIN_SIZE) == 4 * item, "MPI_WIN_SIZE of an allocated window")
mine = memoryview(win.tomemory()).cast("B").cast("i")
win.Lock(rank, MPI.LOCK_EXCLUSIVE)
mine[:] = array.array("i", [-1, 0, 0, 0])
win.Unlock(rank)
comm.Barrier()
win.Lock(right, MPI.LOCK_SHARED)
win.Put(array.array("i", [rank]), right, target=0)
win.Unlock(right)
win.Lock(0, MPI.LOCK_SHARED)
win.Accumulate(array.array("i", [1]), 0, target=1, op=MPI.SUM)
ticket = array.array("i", [-1])
win.Fetch_and_op(array.array("i", [1]), ticket, 0, target_disp=2, op=MPI.SUM)
win.Unlock(0)
check(sorted(comm.allgather(ticket[0])) == list(range(size)), "Fetch_and_op gives each rank its own ticket")
comm.Barrier()
fetched = array.array("i", [-1, -1])
win.Lock(0, MPI.LOCK_SHARED)
win.Get(fetched, 0, target=(1, 2, MPI.INT))
win.Unlock(0)
check(list(fetched) == [size, size], "Accumulate and Fetch_and_op landed at rank 0")
win.Lock(rank, MPI.LOCK_SHARED)
check(mine[0] == left, "Put from the left neighbour landed here")
win.Unlock(rank)
win.Free()

# Win.Create over a Python buffer (bytearray), with fences: each rank writes its
# right neighbour's bytes and reads its left neighbour's back.
exposed = bytearray(8)
win = MPI.Win.Create(exposed, disp_unit=1, comm=comm)
win.Fence()
win.Put(bytearray([rank + 1] * 8), right)
win.Fence()
check(exposed == bytearray([left + 1] * 8), "Put into a bytearray window")
back = bytearray(4)
win.Get(back, left, target=(4, 4, MPI.BYTE))
win.Fence()
check(back == bytearray([((left - 1) % size) + 1] * 4), "Get from a bytearray window")
win.Free()

failed = comm.allreduce(len(failures))
if rank == 0:
    print(f"mpi4py on {size} ranks: {'FAILED' if failed else 'ok'} ({failed} failed checks)")
sys.exit(1 if failed else 0)
