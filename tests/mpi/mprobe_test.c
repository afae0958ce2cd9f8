/* Matched probe (issue 18): every other rank sends rank 0 a run of messages,
 * some above the eager limit; rank 0 takes them with MPI_ANY_SOURCE through
 * MPI_Mprobe + MPI_Mrecv and MPI_Improbe + MPI_Imrecv, with an ordinary
 * wildcard receive in between that must not take a message already matched.
 * Each message arrives exactly once, whole, and in order per sender. Also:
 * MPI_PROC_NULL gives MPI_MESSAGE_NO_PROC, a message to self, and the error
 * class of each bad argument under MPI_ERRORS_RETURN. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { kMessagesPerSender = 24, kLargeInts = 12000 /* 48 KB: rendezvous */ };

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* Message `index` from `sender`: its length and contents. */
static int message_ints(int index) { return index % 3 == 0 ? kLargeInts : 1 + index % 7; }
static int message_value(int sender, int index, int i) { return sender * 1000003 + index * 1009 + i; }

/* Checks a received message against what its sender sent; marks it received. */
static void check_message(const int* data, const MPI_Status* status, int* next_index, int size) {
  const int sender = status->MPI_SOURCE, index = status->MPI_TAG;
  CHECK(sender > 0 && sender < size);
  if (sender <= 0 || sender >= size) return;
  CHECK(index == next_index[sender]); /* once each, in order per sender */
  next_index[sender] = index + 1;
  int count = -1;
  MPI_Get_count(status, MPI_INT, &count);
  CHECK(count == message_ints(index));
  int wrong = 0;
  for (int i = 0; i < count && i < kLargeInts; ++i) wrong += data[i] != message_value(sender, index, i);
  CHECK(wrong == 0);
}

static void contention(int rank, int size) {
  int* buffer = malloc(sizeof(int) * kLargeInts);
  int* other = malloc(sizeof(int) * kLargeInts);
  if (rank != 0) {
    /* All at once: a blocking send of a large message would wait until rank 0
     * receives it, and rank 0's wildcard receive below waits for a later one. */
    MPI_Request requests[kMessagesPerSender];
    int* messages[kMessagesPerSender];
    for (int index = 0; index < kMessagesPerSender; ++index) {
      messages[index] = malloc(sizeof(int) * (size_t)message_ints(index));
      for (int i = 0; i < message_ints(index); ++i) messages[index][i] = message_value(rank, index, i);
      MPI_Isend(messages[index], message_ints(index), MPI_INT, 0, index, MPI_COMM_WORLD, &requests[index]);
    }
    MPI_Waitall(kMessagesPerSender, requests, MPI_STATUSES_IGNORE);
    for (int index = 0; index < kMessagesPerSender; ++index) free(messages[index]);
  }
  int* next_index = calloc((size_t)size, sizeof(int));
  const int total = rank == 0 ? (size - 1) * kMessagesPerSender : 0;
  for (int received = 0; received < total;) {
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status probed, status, took;
    const int blocking = received % 2 == 0;
    if (blocking) {
      CHECK(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &message, &probed) == MPI_SUCCESS);
    } else {
      int flag = 0;
      while (!flag)
        CHECK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &message, &probed) == MPI_SUCCESS);
    }
    CHECK(message != MPI_MESSAGE_NULL && message != MPI_MESSAGE_NO_PROC);
    /* Now and then a wildcard receive between probe and receive: it must get
     * another message (one is still to come, already sent), never the matched one. */
    const int receive_another = received + 1 < total && received % 4 == 1;
    if (receive_another) {
      MPI_Recv(other, kLargeInts, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &took);
      CHECK(!(took.MPI_SOURCE == probed.MPI_SOURCE && took.MPI_TAG == probed.MPI_TAG));
    }
    if (blocking) {
      CHECK(MPI_Mrecv(buffer, kLargeInts, MPI_INT, &message, &status) == MPI_SUCCESS);
    } else {
      MPI_Request request;
      CHECK(MPI_Imrecv(buffer, kLargeInts, MPI_INT, &message, &request) == MPI_SUCCESS);
      MPI_Wait(&request, &status);
    }
    CHECK(message == MPI_MESSAGE_NULL);
    CHECK(status.MPI_SOURCE == probed.MPI_SOURCE && status.MPI_TAG == probed.MPI_TAG);
    int probed_count = -1;
    MPI_Get_count(&probed, MPI_INT, &probed_count);
    CHECK(probed_count == message_ints(status.MPI_TAG));
    /* The matched message was matched first: it comes first in its sender's order. */
    check_message(buffer, &status, next_index, size);
    ++received;
    if (receive_another) {
      check_message(other, &took, next_index, size);
      ++received;
    }
  }
  for (int sender = 1; rank == 0 && sender < size; ++sender) CHECK(next_index[sender] == kMessagesPerSender);
  /* Nothing is left over. */
  int flag = 1;
  MPI_Message message;
  MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &message, MPI_STATUS_IGNORE);
  CHECK(flag == 0);
  free(next_index);
  free(other);
  free(buffer);
}

static void no_proc(void) {
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  int value = 7, flag = 0, count = -1;
  CHECK(MPI_Mprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &message, &status) == MPI_SUCCESS);
  CHECK(message == MPI_MESSAGE_NO_PROC && status.MPI_SOURCE == MPI_PROC_NULL && status.MPI_TAG == MPI_ANY_TAG);
  CHECK(MPI_Mrecv(&value, 1, MPI_INT, &message, &status) == MPI_SUCCESS);
  MPI_Get_count(&status, MPI_INT, &count);
  CHECK(message == MPI_MESSAGE_NULL && status.MPI_SOURCE == MPI_PROC_NULL && count == 0 && value == 7);
  CHECK(MPI_Improbe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &message, &status) == MPI_SUCCESS);
  CHECK(flag == 1 && message == MPI_MESSAGE_NO_PROC);
  MPI_Request request;
  CHECK(MPI_Imrecv(&value, 1, MPI_INT, &message, &request) == MPI_SUCCESS && message == MPI_MESSAGE_NULL);
  CHECK(MPI_Wait(&request, &status) == MPI_SUCCESS && status.MPI_SOURCE == MPI_PROC_NULL);
}

/* A message to self, and what bad arguments return. */
static void self_and_errors(int rank, int size) {
  int out[4] = {1, 2, 3, 4}, in[4] = {0};
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  int flag = 1;
  CHECK(MPI_Improbe(rank, 5, MPI_COMM_WORLD, &flag, &message, &status) == MPI_SUCCESS && flag == 0);
  CHECK(message == MPI_MESSAGE_NULL);
  MPI_Send(out, 4, MPI_INT, rank, 5, MPI_COMM_WORLD);
  CHECK(MPI_Mprobe(rank, 5, MPI_COMM_WORLD, &message, &status) == MPI_SUCCESS);
  /* Matched: neither probes nor receives see it any more. */
  CHECK(MPI_Iprobe(rank, 5, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag == 0);
  /* Bad buffers leave the message to receive. */
  CHECK(error_class(MPI_Mrecv(in, -1, MPI_INT, &message, &status)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Mrecv(in, 4, MPI_DATATYPE_NULL, &message, &status)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Imrecv(in, 4, MPI_INT, &message, NULL)) == MPI_ERR_ARG);
  /* Too small a buffer: MPI_ERR_TRUNCATE, and the message is consumed. */
  CHECK(error_class(MPI_Mrecv(in, 2, MPI_INT, &message, &status)) == MPI_ERR_TRUNCATE);
  CHECK(message == MPI_MESSAGE_NULL && in[0] == 1 && in[1] == 2 && in[2] == 0);
  MPI_Send(out, 4, MPI_INT, rank, 6, MPI_COMM_WORLD);
  CHECK(MPI_Mprobe(MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &message, &status) == MPI_SUCCESS);
  CHECK(MPI_Mrecv(in, 4, MPI_INT, &message, &status) == MPI_SUCCESS && memcmp(in, out, sizeof out) == 0);
  CHECK(status.MPI_SOURCE == rank && status.MPI_TAG == 6);

  CHECK(error_class(MPI_Mrecv(in, 4, MPI_INT, &message, &status)) == MPI_ERR_REQUEST); /* MPI_MESSAGE_NULL */
  CHECK(error_class(MPI_Mrecv(in, 4, MPI_INT, NULL, &status)) == MPI_ERR_REQUEST);
  MPI_Request request;
  CHECK(error_class(MPI_Imrecv(in, 4, MPI_INT, &message, &request)) == MPI_ERR_REQUEST);
  CHECK(error_class(MPI_Mprobe(0, 0, MPI_COMM_NULL, &message, &status)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Improbe(0, 0, MPI_COMM_NULL, &flag, &message, &status)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Mprobe(size, 0, MPI_COMM_WORLD, &message, &status)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Improbe(-7, 0, MPI_COMM_WORLD, &flag, &message, &status)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Mprobe(0, -5, MPI_COMM_WORLD, &message, &status)) == MPI_ERR_TAG);
  CHECK(error_class(MPI_Mprobe(0, 0, MPI_COMM_WORLD, NULL, &status)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Improbe(0, 0, MPI_COMM_WORLD, NULL, &message, &status)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Improbe(0, 0, MPI_COMM_WORLD, &flag, NULL, &status)) == MPI_ERR_ARG);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  contention(rank, size);
  no_proc();
  self_and_errors(rank, size);
  return finish("mprobe");
}
