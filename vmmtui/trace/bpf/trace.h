/* SPDX-License-Identifier: GPL-2.0 */
/* The records trace.bpf.c writes to the ring buffer: the one definition of their layout.
 * vmmtui/trace/records.py decodes them field by field, and tests/trace/test_record_layout.py
 * checks its layouts against these structs as the compiled object's BTF describes them, so a
 * field added (or moved) on one side only fails there. */
#ifndef VMMTUI_TRACE_H
#define VMMTUI_TRACE_H

#define MAXFDS 16 /* fds per record */
#define NAMELEN 128
#define SUNLEN 112

enum kind {
	EV_SEND = 1,
	EV_RECV = 2,
	EV_PIDFD_OPEN = 3,
	EV_PIDFD_GETFD = 4,
	EV_CLOSE = 5,
	EV_CLOSE_RANGE = 6,
	EV_DUP = 7,
	EV_MEMFD = 8,
	EV_FORK = 9,
	EV_EXEC = 10,
	EV_EXIT = 11,
	EV_CUDA = 12,
	EV_FDS = 13,     /* more fds of the message of the record before it (same tid and ktime) */
	EV_QUEUED = 14,  /* SCM_RIGHTS fds still queued on a Unix socket at its release */
	EV_REFUSAL = 15, /* what decides a refused pidfd_getfd, read while both processes live */
	EV_DROPPED = 16, /* SCM_RIGHTS fds the kernel closed: a receive (read()) had no room for them */
	EV_MMAP = 17,    /* mmap of a file that may carry memory, or of a watched one */
	EV_MUNMAP = 18,  /* munmap, mremap or mmap(MAP_FIXED) over a range an EV_MMAP mapped */
	EV_TRUNC = 19,   /* ftruncate of a file that may carry memory (a memfd, a /dev/shm file) */
};

/* every record starts with this (64 bytes); arg[] means what each kind says in records.py */
struct rec {
	__u32 type;
	__u32 tgid;
	__u32 tid;
	__u32 nfds; /* fds in this record (messages); the function's index (CUDA) */
	__u64 ktime;
	__s64 ret;
	__u64 arg[3];
	__u64 file;
};

/* memfd_create, fork, exec, exit */
struct rec_named {
	struct rec h;
	char comm[16];
	__u8 name[NAMELEN];
};

/* a message's SCM_RIGHTS: h.arg = {socket fd, fds in the message, syscall nr}; the fds past the
 * first 16 follow in EV_FDS records, and userspace counts those that never came. sk is the
 * socket's struct sock, peer_sk its peer's (the socket a send's message is queued on; 0 for an
 * unconnected datagram socket): a receive is the send whose peer_sk is the receive's sk. kinds[i]
 * (sends only) tells what files[i] is: superblock magic << 32 | device major << 16 | i_mode. */
struct rec_msg {
	struct rec h;
	__u64 sock_ino;
	__u64 peer_ino;
	__u64 sk;
	__u64 peer_sk;
	__u32 family;
	__u32 namelen;
	__u8 name[SUNLEN];
	__s32 fds[MAXFDS];
	__u64 files[MAXFDS];
	__u64 kinds[MAXFDS];
};

/* EV_FDS: h.arg = {index of the first fd here, fds in the message, nr}.
 * EV_QUEUED: h.arg = {sending socket's inode, fds queued, index of the first fd here},
 *   h.file = the sending socket's struct sock.
 * EV_DROPPED: h.arg = {receiving socket's inode, fds dropped, index of the first fd here},
 *   h.file = the receiving socket's struct sock, h.ret = the syscall (read, readv, recvfrom,
 *   recvmsg without a control buffer). */
struct rec_fds {
	struct rec h;
	__s32 fds[MAXFDS];
	__u64 files[MAXFDS];
	__u64 kinds[MAXFDS];
};

/* a CUDA driver call; h.arg[0] is the struct file of the fd it exported or imported */
struct rec_cuda {
	struct rec h;
	__u64 args[5];
	__u64 dur;
	__u8 name[NAMELEN];
};

/* one side of a refused pidfd_getfd (the caller, the target), as the kernel's ptrace check sees
 * it: credentials, capabilities, user and PID namespace, seccomp, dumpable */
struct side {
	__u32 pid; /* in the initial PID namespace; 0: not found */
	__u32 uid, euid, suid, gid, egid, sgid;
	__u32 userns, pidns;
	__s32 seccomp, filters, dumpable; /* dumpable -1: no mm */
	__u64 cap_eff, cap_prm;
	char comm[16];
};

/* EV_REFUSAL: submitted just before the EV_PIDFD_GETFD record it explains (same thread) */
struct rec_refusal {
	struct rec h;
	struct side caller;
	struct side target;
};

/* EV_CLOSE: h.arg = {fd, how (CLOSED_BY_CLOSE, CLOSED_AT_EXEC), 0}, h.file = the file it named.
 * CLOSED_AT_EXEC: a watched fd the kernel closed at a successful execve (close-on-exec). */
#define CLOSED_BY_CLOSE 0
#define CLOSED_AT_EXEC 1

/* file_kind()'s flag for a tmpfs file on the tmpfs mounted at /dev/shm (POSIX shm_open, PyTorch's
 * shared CPU tensors), told from a memfd (tmpfs too, on the kernel's internal mount): bit 31, in
 * the device-major field, which a regular file leaves 0 */
#define KIND_DEV_SHM (1ULL << 31)

#define PATHLEN 256

/* the kinds of call the kernel looked at for a traced process and recorded nothing of (the
 * `unrecorded` map's keys): a close or a dup of a file not followed, an mmap of no file of
 * interest, an unmap touching no range kept, a send or receive with no control data */
enum unrec {
	UNREC_CLOSE = 0,
	UNREC_DUP = 1,
	UNREC_MMAP = 2,
	UNREC_UNMAP = 3,
	UNREC_MSG = 4,
	UNREC_KINDS = 5,
};

/* EV_MMAP: h.ret = the kernel's return (the address, or -errno), h.arg = {fd, length, offset},
 * h.file = the file mapped; kind as file_kind() packs it, path as /proc/PID/maps would name it
 * (memfd:x, /dev/shm/x, /dev/nvidia-uvm; the last components when deeper, after "...")
 * EV_MUNMAP: h.ret = the result (0 or -errno; mremap: the new address), h.arg = {address, length,
 * new length (mremap)}, h.nfds = the syscall (munmap, mremap, mmap with MAP_FIXED) */
/* EV_TRUNC: h.ret = the result (0 or -errno), h.arg = {fd, length, 0}, h.file = the file sized */

struct rec_map {
	struct rec h;
	__u32 prot;
	__u32 flags;
	__u64 kind;
	__u8 path[PATHLEN];
};

#endif
