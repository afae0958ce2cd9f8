/*
 * vipl.h — the Virtual Interface Provider Library (VIA 1.0) C API of viastack.
 *
 * Names, constants and the descriptor layout follow the VIA 1.0 specification's
 * VIPL header, so programs written to the spec compile unchanged. Linux notes:
 * VIP_ULONG is unsigned long (8 bytes on LP64); VIP_INFINITE is our own value.
 * The engine's thread model: one NIC (and its VIs and CQs) is used by one thread
 * at a time; distinct NICs may be driven from distinct threads.
 */
#ifndef VIASTACK_VIPL_H
#define VIASTACK_VIPL_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void VIP_VOID;
typedef void *VIP_PVOID;
typedef char VIP_CHAR;
typedef unsigned char VIP_UCHAR;
typedef uint16_t VIP_USHORT;
typedef uint32_t VIP_UINT32;
typedef uint64_t VIP_UINT64;
typedef unsigned long VIP_ULONG;
typedef int VIP_BOOLEAN;
typedef uint16_t VIP_UINT16;
typedef uint8_t VIP_UINT8;

#define VIP_TRUE 1
#define VIP_FALSE 0
#define VIP_INFINITE 0xFFFFFFFFul /* timeout that never expires, in milliseconds */

/* A pointer that has the same size on 32- and 64-bit hosts. */
typedef union {
  VIP_UINT64 AddressBits;
  VIP_PVOID Address;
} VIP_PVOID64;

typedef VIP_PVOID VIP_NIC_HANDLE;
typedef VIP_PVOID VIP_VI_HANDLE;
typedef VIP_PVOID VIP_CQ_HANDLE;
typedef VIP_PVOID VIP_PROTECTION_HANDLE;
typedef VIP_PVOID VIP_CONN_HANDLE;
typedef VIP_UINT32 VIP_MEM_HANDLE;
typedef VIP_PVOID VIP_QOS; /* details not defined by the spec */

typedef enum {
  VIP_SUCCESS = 0,
  VIP_NOT_DONE,
  VIP_INVALID_PARAMETER,
  VIP_ERROR_RESOURCE,
  VIP_TIMEOUT,
  VIP_REJECT,
  VIP_INVALID_RELIABILITY_LEVEL,
  VIP_INVALID_MTU,
  VIP_INVALID_QOS,
  VIP_INVALID_PTAG,
  VIP_INVALID_RDMAREAD,
  VIP_DESCRIPTOR_ERROR,
  VIP_INVALID_STATE,
  VIP_ERROR_NAMESERVICE,
  VIP_NO_MATCH
} VIP_RETURN;

/* ---- Descriptors (64-byte aligned, status written in place by the provider) ---- */

typedef struct {
  VIP_PVOID64 Next;
  VIP_MEM_HANDLE NextHandle;
  VIP_UINT16 SegCount;
  VIP_UINT16 Control;
  VIP_UINT32 Reserved;
  VIP_UINT32 ImmediateData;
  VIP_UINT32 Length;
  VIP_UINT32 Status;
} VIP_CONTROL_SEGMENT;

typedef struct {
  VIP_PVOID64 Data;
  VIP_MEM_HANDLE Handle;
  VIP_UINT32 Reserved;
} VIP_ADDRESS_SEGMENT;

typedef struct {
  VIP_PVOID64 Data;
  VIP_MEM_HANDLE Handle;
  VIP_UINT32 Length;
} VIP_DATA_SEGMENT;

typedef union {
  VIP_ADDRESS_SEGMENT Remote;
  VIP_DATA_SEGMENT Local;
} VIP_DESCRIPTOR_SEGMENT;

/* Users needing more segments allocate room for them after DS[1] and set SegCount. */
typedef struct {
  VIP_CONTROL_SEGMENT CS;
  VIP_DESCRIPTOR_SEGMENT DS[2];
} VIP_DESCRIPTOR;

#define VIP_DESCRIPTOR_ALIGNMENT 64

/* Control field */
#define VIP_CONTROL_OP_SENDRECV 0x0
#define VIP_CONTROL_OP_RDMAWRITE 0x1
#define VIP_CONTROL_OP_RDMAREAD 0x2
#define VIP_CONTROL_OP_RESERVED 0x3
#define VIP_CONTROL_OP_MASK 0x3
#define VIP_CONTROL_IMMEDIATE 0x4
#define VIP_CONTROL_QFENCE 0x8
#define VIP_CONTROL_RESERVED 0xFFF0

/* Status field */
#define VIP_STATUS_DONE 0x00000001
#define VIP_STATUS_FORMAT_ERROR 0x00000002
#define VIP_STATUS_PROTECTION_ERROR 0x00000004
#define VIP_STATUS_LENGTH_ERROR 0x00000008
#define VIP_STATUS_PARTIAL_ERROR 0x00000010
#define VIP_STATUS_DESC_FLUSHED_ERROR 0x00000020
#define VIP_STATUS_TRANSPORT_ERROR 0x00000040
#define VIP_STATUS_RDMA_PROT_ERROR 0x00000080
#define VIP_STATUS_REMOTE_DESC_ERROR 0x00000100
#define VIP_STATUS_ERROR_MASK 0x000001FE
#define VIP_STATUS_OP_SEND 0x00000000
#define VIP_STATUS_OP_RECEIVE 0x00010000
#define VIP_STATUS_OP_RDMA_WRITE 0x00020000
#define VIP_STATUS_OP_REMOTE_RDMA_WRITE 0x00030000
#define VIP_STATUS_OP_RDMA_READ 0x00040000
#define VIP_STATUS_OP_MASK 0x00070000
#define VIP_STATUS_IMMEDIATE 0x00080000
#define VIP_STATUS_RESERVED 0xFFF0FE00

/* ---- Attributes ---- */

typedef VIP_USHORT VIP_RELIABILITY_LEVEL;
#define VIP_SERVICE_UNRELIABLE 0x01
#define VIP_SERVICE_RELIABLE_DELIVERY 0x02
#define VIP_SERVICE_RELIABLE_RECEPTION 0x04

/* A VI network address: HostAddressLen bytes of host address followed by
 * DiscriminatorLen bytes of endpoint discriminator, both in HostAddress[].
 * Callers allocate sizeof(VIP_NET_ADDRESS) + both lengths. */
typedef struct {
  VIP_UINT16 HostAddressLen;
  VIP_UINT16 DiscriminatorLen;
  VIP_UINT8 HostAddress[1];
  char padding[3];
} VIP_NET_ADDRESS;

typedef struct {
  VIP_CHAR Name[64];
  VIP_ULONG HardwareVersion;
  VIP_ULONG ProviderVersion;
  VIP_UINT16 NicAddressLen;
  const VIP_UINT8 *LocalNicAddress;
  VIP_BOOLEAN ThreadSafe;
  VIP_UINT16 MaxDiscriminatorLen;
  VIP_ULONG MaxRegisterBytes;
  VIP_ULONG MaxRegisterRegions;
  VIP_ULONG MaxRegisterBlockBytes;
  VIP_ULONG MaxVI;
  VIP_ULONG MaxDescriptorsPerQueue;
  VIP_ULONG MaxSegmentsPerDesc;
  VIP_ULONG MaxCQ;
  VIP_ULONG MaxCQEntries;
  VIP_ULONG MaxTransferSize;
  VIP_ULONG NativeMTU;
  VIP_ULONG MaxPtags;
  VIP_RELIABILITY_LEVEL ReliabilityLevelSupport;
  VIP_RELIABILITY_LEVEL RDMAReadSupport;
} VIP_NIC_ATTRIBUTES;

typedef enum {
  VIP_STATE_IDLE,
  VIP_STATE_CONNECTED,
  VIP_STATE_CONNECT_PENDING,
  VIP_STATE_ERROR
} VIP_VI_STATE;

typedef struct {
  VIP_RELIABILITY_LEVEL ReliabilityLevel;
  VIP_ULONG MaxTransferSize;
  VIP_QOS QoS;
  VIP_PROTECTION_HANDLE Ptag;
  VIP_BOOLEAN EnableRdmaWrite;
  VIP_BOOLEAN EnableRdmaRead;
} VIP_VI_ATTRIBUTES;

typedef struct {
  VIP_PROTECTION_HANDLE Ptag;
  VIP_BOOLEAN EnableRdmaWrite;
  VIP_BOOLEAN EnableRdmaRead;
} VIP_MEM_ATTRIBUTES;

/* ---- Asynchronous errors ---- */

typedef enum {
  VIP_ERROR_POST_DESC,
  VIP_ERROR_CONN_LOST,
  VIP_ERROR_RECVQ_EMPTY,
  VIP_ERROR_VI_OVERRUN,
  VIP_ERROR_RDMAW_PROT,
  VIP_ERROR_RDMAW_DATA,
  VIP_ERROR_RDMAW_ABORT,
  VIP_ERROR_RDMAR_PROT,
  VIP_ERROR_COMP_PROT,
  VIP_ERROR_RDMA_TRANSPORT,
  VIP_ERROR_CATASTROPHIC
} VIP_ERROR_CODE;

typedef enum {
  VIP_RESOURCE_NIC,
  VIP_RESOURCE_VI,
  VIP_RESOURCE_CQ,
  VIP_RESOURCE_DESCRIPTOR
} VIP_RESOURCE_CODE;

typedef struct {
  VIP_NIC_HANDLE NicHandle;
  VIP_VI_HANDLE ViHandle;
  VIP_CQ_HANDLE CQHandle;
  VIP_DESCRIPTOR *DescriptorPtr;
  VIP_ULONG OpCode;
  VIP_RESOURCE_CODE ResourceCode;
  VIP_ERROR_CODE ErrorCode;
} VIP_ERROR_DESCRIPTOR;

#define VIP_SMI_AUTODISCOVERY ((VIP_ULONG)1)

typedef struct {
  VIP_ULONG NumberOfHops;
  VIP_NET_ADDRESS **ADAddrArray;
  VIP_ULONG NumAdAddrs;
} VIP_AUTODISCOVERY_LIST;

/* ---- Functions ---- */

typedef void (*VIP_DESCRIPTOR_NOTIFY)(VIP_PVOID Context, VIP_NIC_HANDLE NicHandle,
                                      VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *DescriptorPtr);
typedef void (*VIP_CQ_NOTIFY)(VIP_PVOID Context, VIP_NIC_HANDLE NicHandle, VIP_VI_HANDLE ViHandle,
                              VIP_BOOLEAN RecvQueue);
typedef void (*VIP_ERROR_HANDLER)(VIP_PVOID Context, VIP_ERROR_DESCRIPTOR *ErrorDesc);

/* DeviceName: NULL, "", "via0" or a provider name ("shm", "tcp") opens this rank's
 * NIC; "shm:N" opens NIC number N of the job explicitly. */
VIP_RETURN VipOpenNic(const VIP_CHAR *DeviceName, VIP_NIC_HANDLE *NicHandle);
VIP_RETURN VipCloseNic(VIP_NIC_HANDLE NicHandle);
VIP_RETURN VipQueryNic(VIP_NIC_HANDLE NicHandle, VIP_NIC_ATTRIBUTES *NicAttribs);

VIP_RETURN VipRegisterMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress, VIP_ULONG Length,
                          VIP_MEM_ATTRIBUTES *MemAttribs, VIP_MEM_HANDLE *MemoryHandle);
VIP_RETURN VipDeregisterMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress,
                            VIP_MEM_HANDLE MemoryHandle);
VIP_RETURN VipQueryMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID Address, VIP_MEM_HANDLE MemHandle,
                       VIP_MEM_ATTRIBUTES *MemAttribs);
VIP_RETURN VipSetMemAttributes(VIP_NIC_HANDLE NicHandle, VIP_PVOID Address,
                               VIP_MEM_HANDLE MemHandle, VIP_MEM_ATTRIBUTES *MemAttribs);
VIP_RETURN VipCreatePtag(VIP_NIC_HANDLE NicHandle, VIP_PROTECTION_HANDLE *Ptag);
VIP_RETURN VipDestroyPtag(VIP_NIC_HANDLE NicHandle, VIP_PROTECTION_HANDLE Ptag);
VIP_RETURN VipErrorCallback(VIP_NIC_HANDLE NicHandle, VIP_PVOID Context, VIP_ERROR_HANDLER Handler);
VIP_RETURN VipQuerySystemManagementInfo(VIP_NIC_HANDLE NicHandle, VIP_ULONG InfoType,
                                        VIP_PVOID SysManInfo);

VIP_RETURN VipCreateVi(VIP_NIC_HANDLE NicHandle, VIP_VI_ATTRIBUTES *ViAttribs,
                       VIP_CQ_HANDLE SendCQHandle, VIP_CQ_HANDLE RecvCQHandle,
                       VIP_VI_HANDLE *ViHandle);
VIP_RETURN VipDestroyVi(VIP_VI_HANDLE ViHandle);
VIP_RETURN VipQueryVi(VIP_VI_HANDLE ViHandle, VIP_VI_STATE *State, VIP_VI_ATTRIBUTES *ViAttribs,
                      VIP_BOOLEAN *ViSendQEmpty, VIP_BOOLEAN *ViRecvQEmpty);
VIP_RETURN VipSetViAttributes(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES *ViAttribs);

VIP_RETURN VipConnectWait(VIP_NIC_HANDLE NicHandle, VIP_NET_ADDRESS *LocalAddr, VIP_ULONG Timeout,
                          VIP_NET_ADDRESS *RemoteAddr, VIP_VI_ATTRIBUTES *RemoteViAttribs,
                          VIP_CONN_HANDLE *ConnHandle);
VIP_RETURN VipConnectAccept(VIP_CONN_HANDLE ConnHandle, VIP_VI_HANDLE ViHandle);
VIP_RETURN VipConnectReject(VIP_CONN_HANDLE ConnHandle);
VIP_RETURN VipConnectRequest(VIP_VI_HANDLE ViHandle, VIP_NET_ADDRESS *LocalAddr,
                             VIP_NET_ADDRESS *RemoteAddr, VIP_ULONG Timeout,
                             VIP_VI_ATTRIBUTES *RemoteViAttribs);
VIP_RETURN VipDisconnect(VIP_VI_HANDLE ViHandle);
VIP_RETURN VipConnectPeerRequest(VIP_VI_HANDLE ViHandle, VIP_NET_ADDRESS *LocalAddr,
                                 VIP_NET_ADDRESS *RemoteAddr, VIP_ULONG Timeout);
VIP_RETURN VipConnectPeerDone(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES *RemoteViAttribs);
VIP_RETURN VipConnectPeerWait(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES *RemoteViAttribs);

VIP_RETURN VipPostSend(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *DescriptorPtr,
                       VIP_MEM_HANDLE MemoryHandle);
VIP_RETURN VipSendDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR **DescriptorPtr);
VIP_RETURN VipSendWait(VIP_VI_HANDLE ViHandle, VIP_ULONG Timeout, VIP_DESCRIPTOR **DescriptorPtr);
VIP_RETURN VipPostRecv(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *DescriptorPtr,
                       VIP_MEM_HANDLE MemoryHandle);
VIP_RETURN VipRecvDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR **DescriptorPtr);
VIP_RETURN VipRecvWait(VIP_VI_HANDLE ViHandle, VIP_ULONG Timeout, VIP_DESCRIPTOR **DescriptorPtr);
/* Notify handlers are one-shot and run inside a later VIPL call on the same NIC
 * (progress is explicit: there is no background thread). */
VIP_RETURN VipSendNotify(VIP_VI_HANDLE ViHandle, VIP_PVOID Context, VIP_DESCRIPTOR_NOTIFY Handler);
VIP_RETURN VipRecvNotify(VIP_VI_HANDLE ViHandle, VIP_PVOID Context, VIP_DESCRIPTOR_NOTIFY Handler);

VIP_RETURN VipCreateCQ(VIP_NIC_HANDLE NicHandle, VIP_ULONG EntryCount, VIP_CQ_HANDLE *CQHandle);
VIP_RETURN VipDestroyCQ(VIP_CQ_HANDLE CQHandle);
VIP_RETURN VipResizeCQ(VIP_CQ_HANDLE CQHandle, VIP_ULONG EntryCount);
VIP_RETURN VipCQDone(VIP_CQ_HANDLE CQHandle, VIP_VI_HANDLE *ViHandle, VIP_BOOLEAN *RecvQueue);
VIP_RETURN VipCQWait(VIP_CQ_HANDLE CQHandle, VIP_ULONG Timeout, VIP_VI_HANDLE *ViHandle,
                     VIP_BOOLEAN *RecvQueue);
VIP_RETURN VipCQNotify(VIP_CQ_HANDLE CQHandle, VIP_PVOID Context, VIP_CQ_NOTIFY Handler);

/* Name service. Names: "rankN" (NIC N of this job), or this machine's host name or
 * "localhost" with NameIndex N. */
VIP_RETURN VipNSInit(VIP_NIC_HANDLE NicHandle, VIP_PVOID NSInitInfo);
VIP_RETURN VipNSGetHostByName(VIP_NIC_HANDLE NicHandle, VIP_CHAR *Name, VIP_NET_ADDRESS *Address,
                              VIP_ULONG NameIndex);
VIP_RETURN VipNSGetHostByAddr(VIP_NIC_HANDLE NicHandle, VIP_NET_ADDRESS *Address, VIP_CHAR *Name,
                              VIP_ULONG *NameLen);
VIP_RETURN VipNSShutdown(VIP_NIC_HANDLE NicHandle);

/* ---- viastack's log (not in the VIA specification; C++: via/log.hpp) ----
 * Every message of viastack's libraries is one line, "viastack[via rank 3] warn: ...",
 * written to stderr, or given to Hook with Context instead: Level is one of
 * VIA_LOG_*, Line the whole line without a newline, valid during the call.
 * Messages come one at a time, from whichever thread logs. A NULL Hook restores
 * stderr. VIASTACK_LOG=error|warn|info|debug sets how much is written. */
#define VIA_LOG_ERROR 0
#define VIA_LOG_WARN 1
#define VIA_LOG_INFO 2
#define VIA_LOG_DEBUG 3
typedef void (*VIA_LOG_HOOK)(void *Context, int Level, const char *Line);
void via_set_log_hook(VIA_LOG_HOOK Hook, void *Context);

/* ---- viastack extensions for diagnosis (not in the VIA specification) ----
 * VipErrorCodeName: the name of an asynchronous error's code, as a
 * VIP_ERROR_HANDLER would print it: "VIP_ERROR_RECVQ_EMPTY".
 * VipReturnName: the name of a VIP_RETURN: "VIP_NO_MATCH" ("an unknown
 * VIP_RETURN" for a value that is none).
 * VipStatusErrorNames: the error bits of a descriptor's Status, each by name
 * with its usual cause, separated by "; ", into Buffer (Size bytes, always
 * NUL-terminated when Size > 0; cut short if too small, as snprintf does).
 * Returns the length of the whole text; "" (0) when no error bit is set.
 * VipQueryFaultCounters: the faults VIASTACK_FAULTS has injected so far into
 * the frames this NIC sent on its unreliable VIs (reliable VIs never see one;
 * C++: via::Nic::counters()). A frame held back to be reordered counts in
 * Reordered, one held only for delay_us in Delayed; a duplicate is counted
 * when its copy leaves. VIP_INVALID_PARAMETER for a bad handle or a NULL
 * Counters. */
typedef struct {
  VIP_UINT64 Dropped;
  VIP_UINT64 Duplicated;
  VIP_UINT64 Reordered;
  VIP_UINT64 Delayed;
} VIP_FAULT_COUNTERS;
const char *VipErrorCodeName(VIP_ERROR_CODE Code);
const char *VipReturnName(VIP_RETURN Code);
size_t VipStatusErrorNames(VIP_UINT32 Status, char *Buffer, size_t Size);
VIP_RETURN VipQueryFaultCounters(VIP_NIC_HANDLE NicHandle, VIP_FAULT_COUNTERS *Counters);

#ifdef __cplusplus
}
#endif
#endif
