// SPDX-License-Identifier: GPL-2.0
/* vmmtui trace: the calls that share memory between processes, seen in the kernel.
 *
 * sys_enter/sys_exit (tp_btf: arguments read straight from the BTF-typed pt_regs; raw_tp, with
 * probe reads, where the kernel refuses tp_btf) catch sendmsg/recvmsg (+mmsg) carrying
 * SCM_RIGHTS, pidfd_open, pidfd_getfd, close, close_range, dup*, fcntl(F_DUPFD*) and memfd_create
 * of the traced processes; sched_process_fork/exec/exit follow the process tree (children of a
 * traced process are traced from their first instruction). Every fd that travels is named by its
 * struct file pointer, read from the fd table of the sender and of the receiver (the same pointer
 * on both sides is the same open file), and its socket by its struct sock and its peer's: a
 * message is queued on the sending socket's peer, so userspace matches a receive to its send
 * exactly, on the socket pair that carried it. The records' layout is trace.h.
 *
 * Cost: every syscall of the machine passes sys_enter and sys_exit, so both end at once for the
 * calls not traced (the syscall number, then one bit of the tgid bitmap: an array lookup the
 * verifier inlines, no helper call). sys_enter decides what a close or dup is worth (the file
 * its fd names must be watched) and stashes that in the task's storage; sys_exit finds it, or
 * ends. A traced call writes one record of its own kind, reserved and submitted in place in its
 * CPU's ring buffer; a message is read at exit (the saved user registers still hold the
 * arguments), its control buffer only when there is one, a cmsg's header and its first 16 fds in
 * one read. Under tp_btf the kernel's structures are read by plain loads the verifier guards
 * (bpf_rdonly_cast), not a probe-read helper call per field; the per-fd work is global functions,
 * verified once.
 *
 * A message with more fds than one record holds (16) is followed by continuation records (up to
 * SCM_RIGHTS' 253); what could not be read is counted in the head record, never cut silently.
 * kfree_skb reports the SCM_RIGHTS fds of a Unix socket's message freed unreceived (the socket
 * holding it released or collected): the kernel's own statement that they were never received;
 * skb_copy_datagram_iovec, a message's fds a read() without room for them made the kernel close.
 * Two uprobe programs, attached by userspace to each CUDA driver function with the function's
 * index as the BPF cookie, record the driver calls with their CUresult. What does not fit in its
 * CPU's ring buffer is counted per CPU with the time of its first and last drop, never dropped
 * silently.
 * Rebuild with scripts/build-bpf.sh (the shipped trace.bpf.o must match this source). */
#include "kernel.h"
#include "trace.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

/* a kernel pointer held as a number, typed again for the verifier (tp_btf): fields are then read
 * by plain loads it guards (a fault reads 0), not a probe-read helper call each; the kfunc
 * compiles to a register move */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
#define CAST(p, T) ((struct T *)bpf_rdonly_cast((void *)(__u64)(p), bpf_core_type_id_kernel(struct T)))

/* keeps the record structs of trace.h in the object's BTF (nothing calls it; libbpf loads only the
 * functions programs call): tests/trace/test_record_layout.py reads them from there */
__attribute__((used)) static int record_layouts(struct rec *a, struct rec_named *b,
						struct rec_msg *c, struct rec_fds *d,
						struct rec_cuda *e)
{
	return 0;
}

__attribute__((used)) static int more_record_layouts(struct rec_refusal *a, struct rec_map *b)
{
	return 0;
}

#define MAXCHUNKS 16 /* records per message: 16 x 16 >= 253 */
#define SCM_MAX_FD 253
#define MAXMSGS 8
#define MAXCMSGS 4
#define MAXCPUS 1024
#define PID_WORDS (4194304 / 64) /* PID_MAX_LIMIT bits */

/* x86_64 syscall numbers */
#define NR_read 0
#define NR_close 3
#define NR_readv 19
#define NR_recvfrom 45
#define NR_dup 32
#define NR_dup2 33
#define NR_sendmsg 46
#define NR_recvmsg 47
#define NR_fcntl 72
#define NR_dup3 292
#define NR_recvmmsg 299
#define NR_sendmmsg 307
#define NR_memfd_create 319
#define NR_pidfd_open 434
#define NR_close_range 436
#define NR_pidfd_getfd 438
#define NR_mmap 9
#define NR_munmap 11
#define NR_mremap 25
#define NR_ftruncate 77
#define NR_execve 59
#define NR_execveat 322
#define MAP_ANONYMOUS 0x20
#define MAP_FIXED 0x10
#define PAGE_SIZE 4096
#define TMPFS_MAGIC 0x01021994
#define HUGETLBFS_MAGIC 0x958458f6
#define DMA_BUF_MAGIC 0x444d4142
#define NVIDIA_MAJOR 195
#define MNT_INTERNAL 0x4000
#define F_DUPFD 0
#define F_DUPFD_CLOEXEC 1030
#define SOL_SOCKET 1
#define SCM_RIGHTS 1
#define AF_UNIX 1

struct config {
	__u32 everything; /* trace every process (--all) */
	__u32 self;       /* the tracer's own tgid: never traced */
};

/* drops of one CPU: userspace writes `seen` (mmap) after it reported up to `count`; the first
 * drop after that starts a new window */
struct drops {
	__u64 count;
	__u64 seen;
	__u64 first;
	__u64 last;
	__u64 unread; /* bytes not yet read in the ring at the last drop: a full ring, or not */
};

struct cuda_args {
	__u64 arg[6];
	__u64 t0;
	__u64 file; /* the struct file of an imported fd, read at entry */
	__u8 ipc[64];
};

struct cuda_key {
	__u32 tid;
	__u32 func;
};

/* one ring buffer per CPU, made by userspace after load (sized from --ring-mb) and put here: a
 * record's reservation takes its own CPU's ring lock, never contends with another CPU's; a
 * record its own ring refuses goes to the next CPU's (see reserve) */
struct ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 12);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MAXCPUS); /* the possible CPUs, set by userspace */
	__type(key, __u32);
	__array(values, struct ring);
} rings SEC(".maps");

/* one bit per tgid: word tgid / 64, bit tgid % 64 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PID_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} traced SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

/* the open files worth following (memfds, fds that travelled or were taken, CUDA exports, and
 * their dups): only their close/dup is recorded, not the hundreds a program start makes */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u8);
} watched SEC(".maps");

/* what sys_enter decided a call is worth, for its sys_exit: the syscall, its arguments, and for a
 * close or dup the watched file its fd names. In the task's own storage (tp_btf), else in a hash
 * by thread id; nr 0 (read) is never stashed, so 0 means "nothing to do at exit" */
struct pending {
	__u64 nr;
	__u64 a0;
	__u64 file;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pending);
} pending_task SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pending);
} pending_tid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cuda_key);
	__type(value, struct cuda_args);
} cuda_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAXCPUS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct drops);
} lost SEC(".maps");

/* --all: calls counted per process and kind in the kernel (no record needed for a count) */
struct count_key {
	__u32 tgid;
	__u32 kind;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct count_key);
	__type(value, __u64);
} counts SEC(".maps");

/* The ranges each traced process mapped from files of interest (EV_MMAP), so that only the
 * munmaps and mremaps that touch one reach userspace: a malloc arena's munmap (most munmaps)
 * ends at this table. MAXRANGES exact ranges a process; past that, one bounding range (lo, hi)
 * holds the rest, which can only report an unmap too many, never miss one. A mapping is
 * inherited across fork (fork(2): the child gets copies of the parent's memory mappings) and
 * dropped at exec and exit. Threads of one process may race on a slot: a slot is claimed by
 * compare-and-swap, and a race can at worst report an unmap of a range not kept (userspace
 * matches an unmap to its mappings by address). */
#define MAXRANGES 32
struct ranges {
	__u64 lo, hi; /* the bounding range of what did not fit; 0, 0: none */
	__u64 start[MAXRANGES];
	__u64 end[MAXRANGES]; /* 0: a free slot */
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct ranges);
} mapped SEC(".maps");

/* the fds of watched files a thread had when it called execve, by thread id: at the exec, those
 * no longer in the table were closed by the kernel (close-on-exec), and are recorded as closes */
#define EXECFDS 16
struct exec_fds {
	__u32 n;
	__s32 fd[EXECFDS];
	__u64 file[EXECFDS];
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH); /* an execve that fails leaves its entry: the oldest go */
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct exec_fds);
} exec_stash SEC(".maps");

/* the calls of traced processes the kernel looked at and decided were worth no record, by kind
 * (trace.h's UNREC_*), per CPU: userspace reads them (Probe.unrecorded), so a trace can say how
 * many calls it saw, not only how many it recorded */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UNREC_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} unrecorded SEC(".maps");

static __always_inline void unrec(__u32 kind)
{
	__u64 *n = bpf_map_lookup_elem(&unrecorded, &kind);
	if (n)
		*n += 1;
}

static __always_inline bool is_traced(__u32 tgid)
{
	__u32 w = tgid >> 6, zero = 0;
	__u64 *bits = bpf_map_lookup_elem(&traced, &w);
	if (bits && (*bits >> (tgid & 63)) & 1)
		return true;
	struct config *c = bpf_map_lookup_elem(&config, &zero);
	return c && c->everything && c->self != tgid;
}

static __always_inline void set_traced(__u32 tgid, bool on)
{
	__u32 w = tgid >> 6;
	__u64 *bits = bpf_map_lookup_elem(&traced, &w);
	if (!bits)
		return;
	if (on)
		__sync_fetch_and_or(bits, 1ULL << (tgid & 63));
	else
		__sync_fetch_and_and(bits, ~(1ULL << (tgid & 63)));
}

static __always_inline void count(__u32 tgid, __u32 kind)
{
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&config, &zero);
	if (!c || !c->everything)
		return;
	struct count_key k = {.tgid = tgid, .kind = kind};
	__u64 *n = bpf_map_lookup_elem(&counts, &k);
	if (n) {
		*n += 1;
		return;
	}
	__u64 one = 1;
	bpf_map_update_elem(&counts, &k, &one, BPF_NOEXIST);
}

static __always_inline void watch_file(__u64 f)
{
	__u8 one = 1;
	if (f && !bpf_map_lookup_elem(&watched, &f))
		bpf_map_update_elem(&watched, &f, &one, BPF_ANY);
}

static __always_inline bool is_watched(__u64 f)
{
	return f && bpf_map_lookup_elem(&watched, &f) != 0;
}

#define BPF_RB_NO_WAKEUP 1
#define BPF_RB_FORCE_WAKEUP 2
#define BPF_RB_AVAIL_DATA 0

static __always_inline void dropped(__u32 cpu, void *ring)
{
	struct drops *d = bpf_map_lookup_elem(&lost, &cpu);
	if (!d)
		return;
	__u64 now = bpf_ktime_get_ns();
	if (d->count == d->seen)
		d->first = now;
	d->last = now;
	d->unread = ring ? bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) : 0;
	__sync_fetch_and_add(&d->count, 1);
}

/* a record of `size` bytes in this CPU's ring buffer, its head filled (NULL, counted, when
 * full). The program stays on its CPU from here to the submit (migration is disabled while a
 * BPF program runs), so a message's records follow each other in one ring. */
static __always_inline void *reserve(__u64 size, __u32 type, __u64 pid_tgid)
{
	__u32 cpu = bpf_get_smp_processor_id() & (MAXCPUS - 1);
	void *ring = bpf_map_lookup_elem(&rings, &cpu);
	struct rec *r = ring ? bpf_ringbuf_reserve(ring, size, 0) : 0;
	if (!r) {
		/* a reservation can fail with its ring nearly empty (seen on CPU 0 of a 2-CPU VM,
		 * about once in 250,000 records, at once, and again when tried again at once): the
		 * next CPU's ring (the first after the last), its lock another, takes the record */
		__u32 next = cpu + 1 < MAXCPUS ? cpu + 1 : 0;
		void *other = bpf_map_lookup_elem(&rings, &next);
		if (!other) {
			next = 0;
			other = bpf_map_lookup_elem(&rings, &next);
		}
		if (other && other != ring)
			r = bpf_ringbuf_reserve(other, size, 0);
	}
	if (!r) {
		dropped(cpu, ring);
		return 0;
	}
	r->type = type;
	r->tgid = pid_tgid >> 32;
	r->tid = (__u32)pid_tgid;
	r->nfds = 0;
	r->ktime = bpf_ktime_get_ns();
	r->ret = 0;
	r->arg[0] = r->arg[1] = r->arg[2] = 0;
	r->file = 0;
	return r;
}

/* records never wake the reader, which collects them every 25 ms (a wake-up per record would be
 * most of the tracer's CPU; the buffer holds seconds of records), except a refused pidfd call:
 * its cause is read from /proc at once, while both processes live */
static __always_inline void submit(void *r, bool now)
{
	bpf_ringbuf_submit(r, now ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* i & (MAXFDS - 1), in a form the compiler cannot fold away (the verifier needs to see it) */
static __always_inline __u64 slot(__u64 i)
{
	asm volatile("%0 &= 15" : "+r"(i));
	return i;
}

/* the struct file an fd of the current process names (0 when none); btf: every pointer loaded
 * directly (tp_btf: the slot of the fd array read through a one-pointer kernel type, no helper),
 * else by probe reads (raw_tp, kprobes) */
static __always_inline __u64 fd_file(int fd, bool btf)
{
	struct fdtable *fdt;
	unsigned int max;
	struct file **arr;
	if (btf) {
		struct task_struct *t = bpf_get_current_task_btf();
		fdt = t->files->fdt;
		max = fdt->max_fds;
		arr = fdt->fd;
	} else {
		struct task_struct *t = (struct task_struct *)bpf_get_current_task();
		fdt = BPF_CORE_READ(t, files, fdt);
		max = BPF_CORE_READ(fdt, max_fds);
		arr = BPF_CORE_READ(fdt, fd);
	}
	if (fd < 0 || (unsigned int)fd >= max)
		return 0;
	if (btf) /* struct hlist_head is { first }: one pointer, as arr[fd] is */
		return (__u64)CAST(&arr[fd], hlist_head)->first;
	struct file *f = 0;
	bpf_probe_read_kernel(&f, sizeof(f), &arr[fd]);
	return (__u64)f;
}

/* what an open file is, for FdsSent.kinds: its superblock's magic << 32 | its device's major
 * << 16 | its i_mode (userspace names memfd, socket, pidfd, dma-buf, /dev/nvidia*) */
__attribute__((noinline)) int on_dev_shm(__u64 file);

static __always_inline __u64 file_kind(__u64 file, bool btf)
{
	if (!file)
		return 0;
	__u32 magic, major;
	__u16 mode;
	if (btf) {
		struct inode *ino = CAST(file, file)->f_inode;
		magic = ino->i_sb->s_magic;
		major = ino->i_rdev >> 20;
		mode = ino->i_mode;
	} else {
		struct inode *ino = BPF_CORE_READ((struct file *)file, f_inode);
		magic = BPF_CORE_READ(ino, i_sb, s_magic);
		major = BPF_CORE_READ(ino, i_rdev) >> 20;
		mode = BPF_CORE_READ(ino, i_mode);
	}
	__u64 kind = ((__u64)magic << 32) | ((major & 0xffff) << 16) | mode;
	if (magic != TMPFS_MAGIC)
		return kind;
	/* a memfd (the kernel's internal tmpfs mount) is told at once, by plain loads under tp_btf;
	 * only a tmpfs file on a mount of its own walks its path (on_dev_shm) */
	int flags = btf ? CAST(file, file)->f_path.mnt->mnt_flags
			: BPF_CORE_READ((struct file *)file, f_path.mnt, mnt_flags);
	if (!(flags & MNT_INTERNAL) && on_dev_shm(file))
		kind |= KIND_DEV_SHM;
	return kind;
}

/* the socket an fd names, and its peer's: inodes, struct socks, family, bound name */
static __always_inline void read_socket(struct rec_msg *m, int sockfd, bool btf)
{
	m->sock_ino = m->peer_ino = m->sk = m->peer_sk = 0;
	m->family = m->namelen = 0;
	__u64 file = fd_file(sockfd, btf);
	if (!file)
		return;
	struct unix_address *addr;
	if (btf) {
		struct file *f = CAST(file, file);
		m->sock_ino = f->f_inode->i_ino;
		struct sock *sk = CAST(f->private_data, socket)->sk;
		if (!sk)
			return;
		m->sk = (__u64)sk;
		m->family = sk->__sk_common.skc_family;
		if (m->family != AF_UNIX)
			return;
		struct unix_sock *us = CAST(sk, unix_sock);
		struct sock *peer = us->peer;
		m->peer_sk = (__u64)peer; /* before accept() the peer has no socket (inode 0) */
		addr = us->addr;
		if (peer) {
			m->peer_ino = peer->sk_socket->file->f_inode->i_ino;
			if (!addr)
				addr = CAST(peer, unix_sock)->addr;
		}
	} else {
		struct file *f = (struct file *)file;
		m->sock_ino = BPF_CORE_READ(f, f_inode, i_ino);
		struct socket *so = BPF_CORE_READ(f, private_data);
		struct sock *sk = BPF_CORE_READ(so, sk);
		if (!sk)
			return;
		m->sk = (__u64)sk;
		m->family = BPF_CORE_READ(sk, __sk_common.skc_family);
		if (m->family != AF_UNIX)
			return;
		struct unix_sock *us = (struct unix_sock *)sk;
		struct sock *peer = BPF_CORE_READ(us, peer);
		m->peer_sk = (__u64)peer;
		if (peer)
			m->peer_ino = BPF_CORE_READ(peer, sk_socket, file, f_inode, i_ino);
		addr = BPF_CORE_READ(us, addr);
		if (!addr && peer)
			addr = BPF_CORE_READ((struct unix_sock *)peer, addr);
	}
	if (!addr)
		return;
	int len = btf ? CAST(addr, unix_address)->len : BPF_CORE_READ(addr, len);
	if (len <= 0)
		return;
	if (len > 110)
		len = 110;
	__u64 n = len;
	asm volatile("%0 &= 127" : "+r"(n));
	if (n > SUNLEN)
		return;
	m->namelen = n;
	bpf_probe_read_kernel(m->name, n, &addr->name);
}

/* fd i of a message's head record: the file it names (now followed: watched) and, for a send,
 * what that file is. Global functions: verified once, not once for each of the 16 fds */
static __always_inline void msg_fd(struct rec_msg *m, __u64 i, bool send, bool btf)
{
	i = slot(i);
	__u64 f = fd_file(m->fds[i], btf);
	m->files[i] = f;
	watch_file(f);
	/* read back from the record: under tp_btf f is a typed pointer, and the global function
	 * file_kind calls takes a number */
	if (send)
		m->kinds[i] = file_kind(*(volatile __u64 *)&m->files[i], btf);
}

__attribute__((noinline)) int msg_fd_btf(struct rec_msg *m, __u64 i, __u64 send)
{
	if (m)
		msg_fd(m, i, send, true);
	return 0;
}

__attribute__((noinline)) int msg_fd_raw(struct rec_msg *m, __u64 i, __u64 send)
{
	if (m)
		msg_fd(m, i, send, false);
	return 0;
}

/* fds [first, first + 16) of a message (user array at `fds`) in an EV_FDS record: verified once
 * (a global function), called for each chunk past the head's */
__attribute__((noinline)) int more_fds(__u64 fds, __u64 first_total, __u64 ktime, __u64 nr)
{
	__u32 first = first_total >> 32, total = (__u32)first_total;
	if (first >= total || total > SCM_MAX_FD)
		return 0;
	struct rec_fds *r = reserve(sizeof(*r), EV_FDS, bpf_get_current_pid_tgid());
	if (!r)
		return 0;
	r->h.ktime = ktime;
	r->h.arg[0] = first;
	r->h.arg[1] = total;
	r->h.arg[2] = nr;
	bool send = nr == NR_sendmsg || nr == NR_sendmmsg;
	__u32 n = 0;
	for (int j = 0; j < MAXFDS; j++) {
		r->fds[j] = -1;
		r->files[j] = 0;
		r->kinds[j] = 0;
	}
	for (int j = 0; j < MAXFDS; j++) {
		if (first + j >= total)
			break;
		__s32 fd = -1;
		if (bpf_probe_read_user(&fd, 4, (void *)(fds + (first + j) * 4)))
			break;
		r->fds[j] = fd;
		r->files[j] = fd_file(fd, false);
		watch_file(r->files[j]);
		if (send)
			r->kinds[j] = file_kind(r->files[j], false);
		n = j + 1;
	}
	r->h.nfds = n;
	submit(r, false);
	return n;
}

/* a msghdr's control buffer and its length */
struct ctl {
	__u64 control;
	__u64 controllen;
};

/* the SCM_RIGHTS of one user msghdr (at `msg`; a receive's control length is what the kernel
 * wrote): a head record per SCM_RIGHTS cmsg with its first 16 fds (the cmsg's header and those
 * fds in one read), then EV_FDS records for the rest. Read at exit, as the call returns (a call
 * that blocked since before the trace began is seen too): a send's fds are still in the
 * sender's table, a receive's were installed by the kernel. */
static __always_inline void read_rights(__u64 msg, __u64 type_nr, int sockfd, long ret, bool btf)
{
	__u32 type = type_nr >> 32, nr = (__u32)type_nr;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct ctl mh = {};
	if (bpf_probe_read_user(&mh, sizeof(mh), (void *)(msg + 32)) || !mh.control ||
	    mh.controllen < 16) {
		unrec(UNREC_MSG);
		return;
	}
	__u64 off = 0;
	for (int c = 0; c < MAXCMSGS; c++) {
		if (off + 16 > mh.controllen)
			break;
		struct {
			__u64 len;
			__s32 level;
			__s32 type;
			__s32 fd[MAXFDS];
		} h = {};
		__u64 size = mh.controllen - off;
		if (size > sizeof(h))
			size = sizeof(h);
		asm volatile("%0 &= 127" : "+r"(size));
		if (size < 16 || size > sizeof(h) ||
		    bpf_probe_read_user(&h, size, (void *)(mh.control + off)))
			break;
		if (h.len < 16 || off + h.len > mh.controllen)
			break;
		if (h.level == SOL_SOCKET && h.type == SCM_RIGHTS) {
			__u64 total = (h.len - 16) / 4;
			if (total > SCM_MAX_FD)
				total = SCM_MAX_FD;
			__u64 fds = mh.control + off + 16;
			struct rec_msg *m = reserve(sizeof(*m), type, pid_tgid);
			if (!m)
				return;
			m->h.ret = ret;
			m->h.arg[0] = sockfd;
			m->h.arg[1] = total;
			m->h.arg[2] = nr;
			read_socket(m, sockfd, btf);
			/* the head's fds came with the header: 16 + 4 * n <= h.len, and <= size */
			__u64 n = total < MAXFDS ? total : MAXFDS;
			for (int j = 0; j < MAXFDS; j++) {
				__u64 i = slot(j);
				m->fds[i] = -1;
				m->files[i] = 0;
				m->kinds[i] = 0;
				if (j >= n)
					continue;
				m->fds[i] = h.fd[i];
				if (btf)
					msg_fd_btf(m, i, type == EV_SEND);
				else
					msg_fd_raw(m, i, type == EV_SEND);
			}
			m->h.nfds = n;
			__u64 ktime = m->h.ktime;
			submit(m, false);
			for (int k = 1; k < MAXCHUNKS; k++) {
				if (k * MAXFDS >= total)
					break;
				more_fds(fds, ((__u64)(k * MAXFDS) << 32) | total, ktime, nr);
			}
		}
		off += (h.len + 7) & ~7ULL;
	}
}

/* verified once each (global functions), however many messages a call carries; fd_ret: the
 * socket fd << 32 | the result (32 bits, sign-extended back) */
__attribute__((noinline)) int rights_btf(__u64 msg, __u64 type_nr, __u64 sockfd, __u64 ret)
{
	read_rights(msg, type_nr, (int)sockfd, (long)ret, true);
	return 0;
}

__attribute__((noinline)) int rights_raw(__u64 msg, __u64 type_nr, __u64 sockfd, __u64 ret)
{
	read_rights(msg, type_nr, (int)sockfd, (long)ret, false);
	return 0;
}

static __always_inline void rights(__u64 msg, __u32 type, long id, int sockfd, long ret, bool btf)
{
	__u64 type_nr = ((__u64)type << 32) | (__u32)id;
	if (btf)
		rights_btf(msg, type_nr, sockfd, ret);
	else
		rights_raw(msg, type_nr, sockfd, ret);
}

/* the facts of one task for a ptrace check; every read a probe read (tp_btf and raw_tp alike) */
static __always_inline void read_side(struct side *s, struct task_struct *t)
{
	s->pid = BPF_CORE_READ(t, tgid);
	const struct cred *c = BPF_CORE_READ(t, cred);
	s->uid = BPF_CORE_READ(c, uid.val);
	s->euid = BPF_CORE_READ(c, euid.val);
	s->suid = BPF_CORE_READ(c, suid.val);
	s->gid = BPF_CORE_READ(c, gid.val);
	s->egid = BPF_CORE_READ(c, egid.val);
	s->sgid = BPF_CORE_READ(c, sgid.val);
	s->cap_eff = BPF_CORE_READ(c, cap_effective.val);
	s->cap_prm = BPF_CORE_READ(c, cap_permitted.val);
	s->userns = BPF_CORE_READ(c, user_ns, ns.inum);
	s->seccomp = BPF_CORE_READ(t, seccomp.mode);
	s->filters = bpf_core_field_exists(t->seccomp.filter_count)
			     ? BPF_CORE_READ(t, seccomp.filter_count.counter)
			     : -1;
	/* the active PID namespace: numbers[level] of the task's pid */
	struct pid *p = BPF_CORE_READ(t, thread_pid);
	if (p) {
		unsigned int level = BPF_CORE_READ(p, level) & 31;
		struct upid up = {};
		bpf_probe_read_kernel(&up, sizeof(up),
				      (void *)p + bpf_core_field_offset(struct pid, numbers) +
					      level * bpf_core_type_size(struct upid));
		s->pidns = BPF_CORE_READ(up.ns, ns.inum);
	}
	void *mm = BPF_CORE_READ(t, mm);
	s->dumpable = -1;
	if (mm) {
		unsigned long flags;
		if (bpf_core_field_exists(((struct mm_struct___bitmap *)mm)->flags.__mm_flags))
			flags = BPF_CORE_READ((struct mm_struct___bitmap *)mm, flags.__mm_flags[0]);
		else
			flags = BPF_CORE_READ((struct mm_struct___long *)mm, flags);
		s->dumpable = flags & 3;
	}
	bpf_probe_read_kernel_str(s->comm, sizeof(s->comm), &t->comm);
}

/* a refused pidfd_getfd: both processes' facts, now, before the caller can exit (userspace reads
 * /proc only for what the kernel record lacks) */
static __always_inline void refusal(__u64 pid_tgid, int pidfd, bool btf)
{
	struct rec_refusal *r = reserve(sizeof(*r), EV_REFUSAL, pid_tgid);
	if (!r)
		return;
	__builtin_memset(&r->caller, 0, sizeof(r->caller));
	__builtin_memset(&r->target, 0, sizeof(r->target));
	read_side(&r->caller, (struct task_struct *)bpf_get_current_task());
	struct file *pf = (struct file *)fd_file(pidfd, btf);
	if (pf) {
		struct pid *p = BPF_CORE_READ(pf, f_inode, i_private);
		if (!p)
			p = BPF_CORE_READ(pf, private_data);
		/* the thread group's leader: tasks[PIDTYPE_TGID], linked by its pid_links[1] */
		struct hlist_node *first = BPF_CORE_READ(p, tasks[1].first);
		if (first)
			read_side(&r->target,
				  (void *)first - bpf_core_field_offset(struct task_struct, pid_links) -
					  sizeof(struct hlist_node));
	}
	submit(r, false);
}


/* ---- mappings: what a process maps of a file that may carry memory, and what it unmaps ---- */

static __always_inline struct mount *real_mount(struct vfsmount *v)
{
	return (struct mount *)((void *)v - bpf_core_field_offset(struct mount, mnt));
}

/* the first four bytes of a dentry's name, as a number ("shm\0", "dev\0") */
static __always_inline __u32 name4(struct dentry *d)
{
	__u32 v = 0;
	const unsigned char *n = BPF_CORE_READ(d, d_name.name);
	if (n)
		bpf_probe_read_kernel(&v, 4, n);
	return v;
}

#define NAME_SHM 0x006d6873 /* "shm\0" */
#define NAME_DEV 0x00766564 /* "dev\0" */

/* one step of a walk from a dentry up to its root, across mounts: at a mount's root, to the
 * dentry it is mounted on; else to the parent, counting the names passed, keeping the last two
 * (the path's top two components at the end) and the first PATHDEPTH (the file's own first).
 * The walk's state is in a per-CPU map, not the stack: the verifier reads it back as numbers it
 * does not follow, so bpf_loop's callback is verified in a few passes, not one per step. */
#define PATHDEPTH 8
struct walk {
	__u64 m, d, top, second, named, whole;
	__u64 names[PATHDEPTH];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk);
} walks SEC(".maps");

static long walk_up(__u64 i, void *unused)
{
	__u32 zero = 0;
	struct walk *w = bpf_map_lookup_elem(&walks, &zero);
	if (!w)
		return 1;
	struct mount *m = (struct mount *)w->m;
	struct dentry *d = (struct dentry *)w->d;
	if (d == BPF_CORE_READ(m, mnt.mnt_root)) {
		struct mount *parent = BPF_CORE_READ(m, mnt_parent);
		if (!parent || parent == m) {
			w->whole = 1;
			return 1;
		}
		w->d = (__u64)BPF_CORE_READ(m, mnt_mountpoint);
		w->m = (__u64)parent;
		return 0;
	}
	struct dentry *up = BPF_CORE_READ(d, d_parent);
	if (!up || up == d) {
		w->whole = 1;
		return 1;
	}
	w->second = w->top;
	w->top = (__u64)d;
	__u64 n = w->named;
	if (n < PATHDEPTH)
		w->names[n & (PATHDEPTH - 1)] = (__u64)BPF_CORE_READ(d, d_name.name);
	w->named = n + 1;
	w->d = (__u64)up;
	return 0;
}

/* the walk from a file's dentry, in this CPU's `walks` (NULL: no map) */
static __always_inline struct walk *walk_file(struct vfsmount *v, struct dentry *d, __u32 steps)
{
	__u32 zero = 0;
	struct walk *w = bpf_map_lookup_elem(&walks, &zero);
	if (!w)
		return 0;
	w->m = (__u64)real_mount(v);
	w->d = (__u64)d;
	w->top = w->second = w->named = w->whole = 0;
	bpf_loop(steps, walk_up, 0, 0);
	return bpf_map_lookup_elem(&walks, &zero);
}

/* is this file under /dev/shm (of its mount namespace)? Its path, walked up to the root across
 * mounts (stacked ones too: /dev/shm is often mounted twice), has "dev" then "shm" at its top. A
 * memfd is tmpfs too but on the kernel's internal mount (MNT_INTERNAL); a tmpfs at /tmp or /run
 * is not /dev/shm. Global: verified once, for every fd of every send (only tmpfs files walk). */
__attribute__((noinline)) int on_dev_shm(__u64 file)
{
	if (!file)
		return 0;
	struct vfsmount *v = BPF_CORE_READ((struct file *)file, f_path.mnt);
	struct dentry *d = BPF_CORE_READ((struct file *)file, f_path.dentry);
	if (!v || !d || (BPF_CORE_READ(v, mnt_flags) & MNT_INTERNAL))
		return 0;
	struct walk *w = walk_file(v, d, 32);
	return w && w->whole && w->named >= 3 && name4((struct dentry *)w->top) == NAME_DEV &&
	       name4((struct dentry *)w->second) == NAME_SHM;
}

/* the path being written, per CPU (a record's worth: too big for the stack beside its callers),
 * with the writing's state (read back by the verifier as numbers, as the walk's) */
struct pathbuf {
	__u64 n, off;
	__u64 names[PATHDEPTH];
	char buf[PATHLEN + 64];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pathbuf);
} paths SEC(".maps");

/* one component of the path, from the root down: "/" and its name (at most 63 bytes) */
static long write_one(__u64 i, void *unused)
{
	__u32 zero = 0;
	struct pathbuf *p = bpf_map_lookup_elem(&paths, &zero);
	if (!p || i >= p->n || p->off >= 127)
		return 1;
	__u64 o = p->off;
	asm volatile("%0 &= 127" : "+r"(o));
	p->buf[o] = '/';
	long got = bpf_probe_read_kernel_str(p->buf + o + 1, 64,
					     (void *)p->names[(p->n - 1 - i) & (PATHDEPTH - 1)]);
	if (got <= 0)
		return 1;
	p->off = o + got; /* o + 1 + (got - 1): over the NUL */
	return 0;
}

/* the name of a mapped file as /proc/PID/maps gives it: on the kernel's internal mounts (memfd,
 * dma-buf) the dentry's name ("memfd:x"), else the path up to the root of the mount namespace,
 * crossing mounts, its last PATHDEPTH components after "..." when deeper. Rare (an mmap of a
 * file of interest): probe reads, and bpf_loop for both walks. */
__attribute__((noinline)) int file_path(struct rec_map *r, __u64 file)
{
	__u32 zero = 0;
	if (!r || !file)
		return 0;
	r->path[0] = 0;
	struct file *f = (struct file *)file;
	struct vfsmount *v = BPF_CORE_READ(f, f_path.mnt);
	struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
	if (!v || !d)
		return 0;
	if (BPF_CORE_READ(v, mnt_flags) & MNT_INTERNAL) {
		bpf_probe_read_kernel_str(r->path, 128, BPF_CORE_READ(d, d_name.name));
		return 0;
	}
	struct walk *w = walk_file(v, d, 4 * PATHDEPTH);
	struct pathbuf *p = bpf_map_lookup_elem(&paths, &zero);
	if (!w || !p)
		return 0;
	p->n = w->named < PATHDEPTH ? w->named : PATHDEPTH;
	for (int k = 0; k < PATHDEPTH; k++)
		p->names[k] = w->names[k];
	p->off = 0;
	p->buf[0] = 0;
	if (!w->whole || w->named > PATHDEPTH) {
		p->buf[0] = p->buf[1] = p->buf[2] = '.';
		p->buf[3] = 0;
		p->off = 3;
	}
	bpf_loop(PATHDEPTH, write_one, 0, 0);
	if (p->off == 0) { /* the root itself */
		p->buf[0] = '/';
		p->buf[1] = 0;
	}
	bpf_probe_read_kernel(r->path, PATHLEN, p->buf);
	r->path[PATHLEN - 1] = 0;
	return 0;
}

/* a zeroed struct ranges, to start a process's table from (too big for the stack) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ranges);
} no_ranges SEC(".maps");

/* [start, end) mapped by tgid from a file of interest: into a free slot (claimed by compare-and-
 * swap: its end goes 0 -> 1 -> end, so a half-written slot names no real range), else into the
 * bounding range */
__attribute__((noinline)) int ranges_add(__u64 tgid, __u64 start, __u64 end)
{
	__u32 k = tgid, zero = 0;
	struct ranges *r = bpf_map_lookup_elem(&mapped, &k);
	if (!r) {
		struct ranges *blank = bpf_map_lookup_elem(&no_ranges, &zero);
		if (!blank)
			return 0;
		bpf_map_update_elem(&mapped, &k, blank, BPF_NOEXIST);
		r = bpf_map_lookup_elem(&mapped, &k);
		if (!r)
			return 0;
	}
	for (int i = 0; i < MAXRANGES; i++) {
		if (r->end[i] == 0 && __sync_val_compare_and_swap(&r->end[i], 0, 1) == 0) {
			r->start[i] = start;
			r->end[i] = end;
			return 1;
		}
	}
	if (r->hi == 0) {
		r->lo = start;
		r->hi = end;
	} else {
		if (start < r->lo)
			r->lo = start;
		if (end > r->hi)
			r->hi = end;
	}
	return 1;
}

/* does [start, end) touch a range tgid mapped from a file of interest? With `cut` (the unmap
 * happened), what it covered is no longer kept: a range covered whole is freed, one cut at an
 * end shrinks, one cut in its middle keeps its two sides (the tail in a free slot, else in the
 * bounding range). A bounding range is freed only when covered whole. The slots are gone through
 * by bpf_loop: one verification of the body, not one per slot and outcome. */
struct hit_ctx {
	struct ranges *r;
	__u64 start, end, cut;
	__u64 hit, tail_s, tail_e;
};

static long hit_one(__u64 i, struct hit_ctx *c)
{
	struct ranges *r = c->r;
	if (!r || i >= MAXRANGES)
		return 1;
	__u64 s = r->start[i], e = r->end[i];
	if (e <= 1 || e <= c->start || s >= c->end)
		return 0;
	c->hit = 1;
	if (!c->cut)
		return 1; /* one touched is enough */
	if (c->start <= s && c->end >= e) {
		r->end[i] = 0;
	} else if (c->start <= s) {
		r->start[i] = c->end;
	} else if (c->end >= e) {
		r->end[i] = c->start;
	} else {
		r->end[i] = c->start;
		c->tail_s = c->end;
		c->tail_e = e;
	}
	return 0;
}

__attribute__((noinline)) int ranges_hit(__u64 tgid, __u64 start, __u64 end, __u64 cut)
{
	__u32 k = tgid;
	struct ranges *r = bpf_map_lookup_elem(&mapped, &k);
	if (!r)
		return 0;
	struct hit_ctx c = {.r = r, .start = start, .end = end, .cut = cut};
	bpf_loop(MAXRANGES, hit_one, &c, 0);
	if (r->hi > start && r->lo < end) {
		c.hit = 1;
		if (cut && start <= r->lo && end >= r->hi)
			r->lo = r->hi = 0;
	}
	if (c.tail_e)
		ranges_add(tgid, c.tail_s, c.tail_e);
	return c.hit != 0;
}

static __always_inline __u64 page_end(__u64 addr, __u64 len)
{
	return (addr + len + PAGE_SIZE - 1) & ~(__u64)(PAGE_SIZE - 1);
}

/* is a mapping of this file worth following? A file that carries memory: tmpfs (memfd, /dev/shm,
 * a tmpfs file elsewhere), hugetlbfs, a dma-buf, an NVIDIA device (/dev/nvidia*; /dev/nvidia-uvm's
 * major is dynamic: by name). Not "any watched file": `watched` keeps file pointers after their
 * last close, and a pointer the kernel reuses for a shared library would then be followed. */
__attribute__((noinline)) int map_worth(__u64 file)
{
	if (!file)
		return 0;
	struct inode *ino = BPF_CORE_READ((struct file *)file, f_inode);
	__u64 magic = BPF_CORE_READ(ino, i_sb, s_magic);
	if (magic == TMPFS_MAGIC || magic == HUGETLBFS_MAGIC || magic == DMA_BUF_MAGIC)
		return 1;
	if ((BPF_CORE_READ(ino, i_mode) & 0170000) != 0020000) /* S_IFCHR */
		return 0;
	if ((BPF_CORE_READ(ino, i_rdev) >> 20) == NVIDIA_MAJOR)
		return 1;
	char name[8] = {};
	bpf_probe_read_kernel(name, 6, BPF_CORE_READ((struct file *)file, f_path.dentry, d_name.name));
	return name[0] == 'n' && name[1] == 'v' && name[2] == 'i' && name[3] == 'd' &&
	       name[4] == 'i' && name[5] == 'a';
}

/* an unmap (munmap, mremap, an mmap with MAP_FIXED over what was there) that touched a kept range */
static __always_inline void unmapped(__u64 pid_tgid, __u64 nr, long ret, __u64 addr, __u64 len,
				     __u64 new_len)
{
	struct rec *r = reserve(sizeof(*r), EV_MUNMAP, pid_tgid);
	if (!r)
		return;
	r->nfds = nr;
	r->ret = ret;
	r->arg[0] = addr;
	r->arg[1] = len;
	r->arg[2] = new_len;
	submit(r, false);
}

/* an mmap as it returns: a MAP_FIXED one first unmaps whatever it lands on; one of a file worth
 * following is recorded (the file, what it is, its name) and its range kept. Global: one
 * verification for both hook flavours. */
__attribute__((noinline)) int on_mmap(__u64 addr, __u64 len, __u64 prot_flags, __u64 fd_off,
				      __u64 ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	__u32 prot = prot_flags >> 32, flags = (__u32)prot_flags;
	long res = (long)ret;
	if ((flags & MAP_FIXED) && res >= 0 && ranges_hit(tgid, addr, page_end(addr, len), 1))
		unmapped(pid_tgid, NR_mmap, 0, addr, len, 0);
	if (flags & MAP_ANONYMOUS) {
		unrec(UNREC_MMAP);
		return 0;
	}
	int fd = (int)(fd_off >> 32);
	__u64 file = fd_file(fd, false);
	if (!map_worth(file)) {
		unrec(UNREC_MMAP);
		return 0;
	}
	struct rec_map *r = reserve(sizeof(*r), EV_MMAP, pid_tgid);
	if (r) {
		r->h.ret = res;
		r->h.arg[0] = fd;
		r->h.arg[1] = len;
		r->h.arg[2] = (__u32)fd_off * PAGE_SIZE; /* the offset in pages, see on_exit */
		r->h.file = file;
		r->prot = prot;
		r->flags = flags;
		r->kind = file_kind(file, false);
		file_path(r, file);
		submit(r, false);
	}
	if (res >= 0) {
		ranges_add(tgid, ret, page_end(ret, len));
		watch_file(file); /* its closes and dups matter now: the mapping outlives its fd */
	}
	count(tgid, EV_MMAP);
	return 0;
}

/* ---- close-on-exec: the watched fds a successful execve closed ---- */

struct exec_scan {
	__u64 arr;
	struct exec_fds s;
};

static long exec_scan_one(__u64 i, struct exec_scan *c)
{
	__u64 f = 0;
	bpf_probe_read_kernel(&f, 8, (void *)(c->arr + i * 8));
	if (!f || !is_watched(f))
		return 0;
	__u32 n = c->s.n;
	if (n >= EXECFDS)
		return 1;
	c->s.fd[n & (EXECFDS - 1)] = i;
	c->s.file[n & (EXECFDS - 1)] = f;
	c->s.n = n + 1;
	return 0;
}

/* at execve's entry: the watched fds of the caller (up to EXECFDS), for the exec to compare */
__attribute__((noinline)) int exec_stash_fds(__u64 tid)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	__u32 max = BPF_CORE_READ(fdt, max_fds);
	struct exec_scan c = {.arr = (__u64)BPF_CORE_READ(fdt, fd)};
	if (max > 65536)
		max = 65536;
	bpf_loop(max, exec_scan_one, &c, 0);
	__u32 k = tid;
	bpf_map_update_elem(&exec_stash, &k, &c.s, BPF_ANY);
	return 0;
}

/* at the exec (sched_process_exec: the point of no return is past, close-on-exec done): each
 * stashed fd that no longer names its file was closed by the exec, and is recorded as a close */
__attribute__((noinline)) int exec_closes(__u64 old_tid)
{
	__u32 k = old_tid;
	struct exec_fds *s = bpf_map_lookup_elem(&exec_stash, &k);
	if (!s)
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	for (int i = 0; i < EXECFDS; i++) {
		if (i >= s->n)
			break;
		if (fd_file(s->fd[i], false) == s->file[i])
			continue;
		struct rec *r = reserve(sizeof(*r), EV_CLOSE, pid_tgid);
		if (!r)
			break;
		r->arg[0] = s->fd[i];
		r->arg[1] = CLOSED_AT_EXEC;
		r->file = s->file[i];
		submit(r, false);
	}
	bpf_map_delete_elem(&exec_stash, &k);
	return 0;
}

#define REG(regs, f) (btf ? (regs)->f : BPF_CORE_READ(regs, f))

/* the syscalls the trace records; every other one ends here, at enter and at exit */
static __always_inline bool wanted(long id)
{
	switch (id) {
	case NR_close:
	case NR_sendmsg:
	case NR_recvmsg:
	case NR_sendmmsg:
	case NR_recvmmsg:
	case NR_close_range:
	case NR_dup:
	case NR_dup2:
	case NR_dup3:
	case NR_fcntl:
	case NR_memfd_create:
	case NR_pidfd_open:
	case NR_pidfd_getfd:
	case NR_mmap:
	case NR_munmap:
	case NR_mremap:
	case NR_ftruncate:
		return true;
	}
	return false;
}

/* the calls sys_enter decides on: a close or dup matters only for a watched file, and the file
 * an fd named is gone from the table at exit. The rest are read at exit alone, as they return:
 * a message's control buffer costs one read there as at enter, and a send or receive that
 * blocked since before the trace (or this process's following) began is seen too. */
static __always_inline bool decided_at_enter(long id)
{
	switch (id) {
	case NR_close:
	case NR_dup:
	case NR_dup2:
	case NR_dup3:
	case NR_fcntl:
		return true;
	}
	return false;
}

/* sys_enter decides: the syscall number, then the tracked-process bit, then the file (a close
 * or dup of a file not watched, a fcntl that is no dup: nothing). What is left is stashed for
 * sys_exit, which then only finds it. */
static __always_inline int on_enter(struct pt_regs *regs, long id, bool btf)
{
	/* one switch on the number: every other syscall of the machine ends at its default */
	switch (id) {
	case NR_execve:
	case NR_execveat: {
		__u64 pid_tgid = bpf_get_current_pid_tgid();
		if (is_traced(pid_tgid >> 32))
			exec_stash_fds((__u32)pid_tgid);
		return 0;
	}
	case NR_close:
	case NR_dup:
	case NR_dup2:
	case NR_dup3:
	case NR_fcntl:
		break;
	default:
		return 0;
	}
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!is_traced(pid_tgid >> 32))
		return 0;
	struct pending p = {.nr = id};
	p.a0 = REG(regs, di);
	switch (id) {
	case NR_fcntl: {
		long cmd = REG(regs, si);
		if (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC)
			return 0;
	}
		/* fall through */
	case NR_close:
	case NR_dup:
	case NR_dup2:
	case NR_dup3:
		/* only the files the trace follows: their close, their dups (the new fd names the
		 * same file) */
		p.file = fd_file((int)p.a0, btf);
		if (!is_watched(p.file)) {
			unrec(id == NR_close ? UNREC_CLOSE : UNREC_DUP);
			return 0;
		}
		break;
	}
	if (btf) {
		struct pending *slot = bpf_task_storage_get(
			&pending_task, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (slot)
			*slot = p;
		return 0;
	}
	__u32 tid = (__u32)pid_tgid;
	bpf_map_update_elem(&pending_tid, &tid, &p, BPF_ANY);
	return 0;
}

static __always_inline int on_exit(struct pt_regs *regs, long ret, bool btf)
{
	long id;
	__u64 pid_tgid;
	if (btf) { /* the syscall number first: a load, no helper */
		id = regs->orig_ax;
		if (!wanted(id))
			return 0;
		pid_tgid = bpf_get_current_pid_tgid();
		if (!is_traced(pid_tgid >> 32))
			return 0;
	} else { /* the tgid first: reading the number is a probe read */
		pid_tgid = bpf_get_current_pid_tgid();
		if (!is_traced(pid_tgid >> 32))
			return 0;
		id = BPF_CORE_READ(regs, orig_ax);
		if (!wanted(id))
			return 0;
	}
	/* the arguments are still in the saved user registers */
	__u64 a0 = REG(regs, di), a1 = REG(regs, si);
	__u64 file = 0;
	if (decided_at_enter(id)) {
		__u32 tid = (__u32)pid_tgid;
		struct pending *slot =
			btf ? bpf_task_storage_get(&pending_task, bpf_get_current_task_btf(), 0, 0)
			    : bpf_map_lookup_elem(&pending_tid, &tid);
		if (!slot || slot->nr != id || slot->a0 != a0)
			return 0; /* decided at enter: nothing to record */
		file = slot->file;
		if (btf)
			slot->nr = 0;
		else
			bpf_map_delete_elem(&pending_tid, &tid);
	}
	__u32 tgid = pid_tgid >> 32;
	switch (id) {
	case NR_mmap: {
		/* mmap(addr, length, prot, flags, fd, offset): flags in r10, fd in r8, offset in r9 */
		__u64 flags = (__u32)REG(regs, r10), prot = (__u32)REG(regs, dx);
		if ((flags & (MAP_ANONYMOUS | MAP_FIXED)) == MAP_ANONYMOUS) {
			unrec(UNREC_MMAP); /* an allocator's fresh memory (most mmaps): nothing to do */
			return 0;
		}
		__u64 fd = (__u32)REG(regs, r8), off = REG(regs, r9);
		/* the offset travels in pages (mmap's is page-aligned; else the call failed) */
		on_mmap(a0, a1, prot << 32 | flags, fd << 32 | (__u32)(off / PAGE_SIZE), ret);
		return 0;
	}
	case NR_munmap: {
		if (ranges_hit(tgid, a0, page_end(a0, a1), ret == 0))
			unmapped(pid_tgid, NR_munmap, ret, a0, a1, 0);
		else
			unrec(UNREC_UNMAP);
		return 0;
	}
	case NR_mremap: {
		/* mremap(old, old_len, new_len, flags, new_addr): the old range goes (old_len 0 copies
		 * a shared mapping and leaves it), the new is kept where the kernel put it */
		__u64 new_len = REG(regs, dx);
		if (!ranges_hit(tgid, a0, page_end(a0, a1), ret >= 0 && a1)) {
			unrec(UNREC_UNMAP);
			return 0;
		}
		if (ret >= 0)
			ranges_add(tgid, ret, page_end(ret, new_len));
		unmapped(pid_tgid, NR_mremap, ret, a0, a1, new_len);
		return 0;
	}
	case NR_ftruncate: {
		/* the size of a memory file (a memfd, a /dev/shm file): what a pile of them pins */
		__u64 sized = ret == 0 ? fd_file((int)a0, btf) : 0;
		if (!map_worth(sized))
			return 0;
		struct rec *r = reserve(sizeof(*r), EV_TRUNC, pid_tgid);
		if (r) {
			r->ret = ret;
			r->arg[0] = (int)a0;
			r->arg[1] = a1;
			r->file = sized;
			submit(r, false);
		}
		return 0;
	}
	case NR_close: {
		struct rec *r = reserve(sizeof(*r), EV_CLOSE, pid_tgid);
		if (r) {
			r->ret = ret;
			r->arg[0] = (int)a0;
			r->file = file;
			submit(r, false);
		}
		count(tgid, EV_CLOSE);
		return 0;
	}
	case NR_sendmsg:
	case NR_recvmsg: {
		__u32 type = id == NR_sendmsg ? EV_SEND : EV_RECV;
		if (type == EV_RECV && ret < 0)
			return 0;
		rights(a1, type, id, (int)a0, ret, btf);
		count(tgid, type);
		return 0;
	}
	case NR_sendmmsg:
	case NR_recvmmsg: {
		__u32 type = id == NR_sendmmsg ? EV_SEND : EV_RECV;
		if (type == EV_RECV && ret < 0)
			return 0;
		__u64 vec = a1, vlen = REG(regs, dx);
		int sockfd = (int)a0;
		/* the messages that went (a refused call: the first, with the error) */
		__u64 n = ret > 0 ? (__u64)ret : 1;
		if (n > vlen)
			n = vlen;
		for (int m = 0; m < MAXMSGS; m++) {
			if (m >= n)
				break;
			rights(vec + m * 64, type, id, sockfd, ret, btf);
		}
		count(tgid, type);
		return 0;
	}
	case NR_close_range: {
		struct rec *r = reserve(sizeof(*r), EV_CLOSE_RANGE, pid_tgid);
		if (r) {
			r->ret = ret;
			r->arg[0] = (__u32)a0;
			r->arg[1] = (__u32)a1;
			submit(r, false);
		}
		count(tgid, EV_CLOSE_RANGE);
		return 0;
	}
	case NR_fcntl:
	case NR_dup:
	case NR_dup2:
	case NR_dup3: {
		if (ret < 0) /* a refused dup of a watched fd: the old fd still names the file */
			return 0;
		struct rec *r = reserve(sizeof(*r), EV_DUP, pid_tgid);
		if (r) {
			r->ret = ret;
			r->arg[0] = (int)a0;
			r->arg[2] = id;
			r->file = file; /* the new fd names the old one's file */
			submit(r, false);
		}
		count(tgid, EV_DUP);
		return 0;
	}
	case NR_memfd_create: {
		struct rec_named *r = reserve(sizeof(*r), EV_MEMFD, pid_tgid);
		if (!r)
			return 0;
		r->h.ret = ret;
		if (ret >= 0) {
			r->h.file = fd_file((int)ret, btf);
			watch_file(r->h.file);
		}
		__builtin_memset(r->comm, 0, sizeof(r->comm));
		/* the name as the kernel keeps it: the new file's dentry is "memfd:" and the name
		 * asked (a kernel read, cheaper than the user string), else the string asked */
		const unsigned char *kname = 0;
		if (btf && r->h.file)
			kname = CAST(r->h.file, file)->f_path.dentry->d_name.name;
		if (kname ? bpf_probe_read_kernel_str(r->name, NAMELEN, kname + 6) < 0
			  : bpf_probe_read_user_str(r->name, NAMELEN, (void *)a0) < 0)
			r->name[0] = 0;
		submit(r, false);
		count(tgid, EV_MEMFD);
		return 0;
	}
	case NR_pidfd_open: {
		struct rec *r = reserve(sizeof(*r), EV_PIDFD_OPEN, pid_tgid);
		if (r) {
			r->ret = ret;
			r->arg[0] = (int)a0;
			if (ret >= 0) {
				r->file = fd_file((int)ret, btf);
				watch_file(r->file);
			}
			/* a refused pidfd call at once: its cause is read from /proc while both live */
			submit(r, ret < 0);
		}
		count(tgid, EV_PIDFD_OPEN);
		return 0;
	}
	case NR_pidfd_getfd: {
		int pidfd = (int)a0;
		if (ret < 0)
			refusal(pid_tgid, pidfd, btf);
		struct rec *r = reserve(sizeof(*r), EV_PIDFD_GETFD, pid_tgid);
		if (!r)
			return 0;
		r->ret = ret;
		r->arg[0] = pidfd;
		r->arg[1] = (int)a1;
		struct file *pf = (struct file *)fd_file(pidfd, btf);
		if (pf) { /* pidfs keeps the struct pid in the inode (6.9+), older kernels in the file */
			struct pid *pp = BPF_CORE_READ(pf, f_inode, i_private);
			if (!pp)
				pp = BPF_CORE_READ(pf, private_data);
			r->arg[2] = BPF_CORE_READ(pp, numbers[0].nr);
		}
		if (ret >= 0) {
			r->file = fd_file((int)ret, btf);
			watch_file(r->file);
		}
		submit(r, ret < 0);
		count(tgid, EV_PIDFD_GETFD);
		return 0;
	}
	}
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	return on_enter(regs, id, true);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	return on_exit(regs, ret, true);
}

/* the fallback where the kernel refuses tp_btf: the same, with probe reads */
SEC("raw_tp/sys_enter")
int BPF_PROG(raw_sys_enter, struct pt_regs *regs, long id)
{
	return on_enter(regs, id, false);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(raw_sys_exit, struct pt_regs *regs, long ret)
{
	return on_exit(regs, ret, false);
}

static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 cpid = BPF_CORE_READ(child, pid), ctgid = BPF_CORE_READ(child, tgid);
	if (cpid != ctgid || !is_traced(ptgid))
		return 0;
	set_traced(ctgid, true);
	/* the child has copies of the parent's mappings (fork(2)) */
	struct ranges *kept = bpf_map_lookup_elem(&mapped, &ptgid);
	if (kept)
		bpf_map_update_elem(&mapped, &ctgid, kept, BPF_ANY);
	struct rec_named *r = reserve(sizeof(*r), EV_FORK, bpf_get_current_pid_tgid());
	if (!r)
		return 0;
	r->h.tgid = ptgid;
	r->h.arg[0] = ctgid;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	r->name[0] = 0;
	submit(r, false);
	return 0;
}

static __always_inline int on_exec(struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (!is_traced(tgid))
		return 0;
	bpf_map_delete_elem(&mapped, &tgid); /* a new program: a new address space */
	struct rec_named *r = reserve(sizeof(*r), EV_EXEC, bpf_get_current_pid_tgid());
	if (r) {
		bpf_get_current_comm(r->comm, sizeof(r->comm));
		const char *fn = BPF_CORE_READ(bprm, filename);
		if (bpf_probe_read_kernel_str(r->name, NAMELEN, fn) < 0)
			r->name[0] = 0;
		submit(r, false);
	}
	exec_closes((__u32)old_pid);
	return 0;
}

static __always_inline int on_exit_process(struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (!is_traced(tgid))
		return 0;
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0; /* not the last thread */
	struct rec_named *r = reserve(sizeof(*r), EV_EXIT, bpf_get_current_pid_tgid());
	if (r) {
		r->h.ret = BPF_CORE_READ(p, exit_code);
		bpf_get_current_comm(r->comm, sizeof(r->comm));
		r->name[0] = 0;
		submit(r, false);
	}
	set_traced(tgid, false);
	bpf_map_delete_elem(&mapped, &tgid);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(proc_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(proc_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	return on_exec(p, old_pid, bprm);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(proc_exit, struct task_struct *p)
{
	return on_exit_process(p);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(raw_proc_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(raw_proc_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	return on_exec(p, old_pid, bprm);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(raw_proc_exit, struct task_struct *p)
{
	return on_exit_process(p);
}

/* is_watched as a global function: verified once, its answer a number for the caller (no path
 * for each answer of each of 16 fds) */
__attribute__((noinline)) int file_watched(__u64 f)
{
	return is_watched(f);
}

/* the fds of one discarded message (its scm_fp_list) from index `first`, in one EV_QUEUED or
 * EV_DROPPED record (type_any: the type << 32 | --all); only files the trace follows are reported
 * (a discard elsewhere on the machine says nothing), or every one under --all. `sk` is the
 * socket's struct sock, `extra` goes to h.ret. */
__attribute__((noinline)) int fp_chunk(__u64 fpl, __u64 first_total, __u64 ino, __u64 sk,
				       __u64 type_extra_any)
{
	__u32 first = first_total >> 32, total = (__u32)first_total;
	__u32 type = type_extra_any >> 32, extra = (__u32)type_extra_any >> 1;
	bool any = type_extra_any & 1;
	if (first >= total || total > SCM_MAX_FD)
		return 0;
	__u64 files[MAXFDS] = {};
	__u32 n = 0, watched_here = 0;
	struct scm_fp_list *fp = (struct scm_fp_list *)fpl;
	for (int j = 0; j < MAXFDS; j++) {
		__u32 i = first + j;
		if (i >= total || i >= SCM_MAX_FD)
			break;
		__u64 f = 0;
		bpf_probe_read_kernel(&f, 8, &fp->fp[i]);
		files[j] = f;
		watched_here |= file_watched(f);
		n = j + 1;
	}
	if (!watched_here && !any)
		return 0;
	struct rec_fds *r = reserve(sizeof(*r), type, bpf_get_current_pid_tgid());
	if (!r)
		return 0;
	r->h.nfds = n;
	r->h.ret = extra;
	r->h.arg[0] = ino;
	r->h.arg[1] = total;
	r->h.arg[2] = first;
	r->h.file = sk;
	for (int j = 0; j < MAXFDS; j++) {
		r->fds[j] = -1;
		r->files[j] = files[j];
		r->kinds[j] = 0;
	}
	submit(r, false);
	return n;
}

static __always_inline void fp_records(struct scm_fp_list *fp, __u64 ino, __u64 sk, __u32 type,
				       __u32 extra)
{
	__u32 total = BPF_CORE_READ(fp, count);
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&config, &zero);
	__u64 tea = ((__u64)type << 32) | ((extra & 0x7fffffff) << 1) | (c && c->everything);
	for (int k = 0; k < MAXCHUNKS; k++) {
		if (k * MAXFDS >= total)
			break;
		fp_chunk((__u64)fp, ((__u64)(k * MAXFDS) << 32) | total, ino, sk, tea);
	}
}

/* A Unix socket's message freed with its SCM_RIGHTS still attached: received messages had their
 * fds detached (UNIXCB(skb).fp = NULL) before they are freed, so these fds were sent and never
 * received: the socket holding them was released (close, exit) or collected with them queued.
 * kfree_skb fires before the skb's destructor (unix_destruct_scm) drops the files. */
static __always_inline int on_skb_freed(struct sk_buff *skb)
{
	struct sock *sk = BPF_CORE_READ(skb, sk);
	if (!sk || BPF_CORE_READ(sk, __sk_common.skc_family) != AF_UNIX)
		return 0;
	__u64 cb = (__u64)skb + bpf_core_field_offset(struct sk_buff, cb);
	struct scm_fp_list *fp = BPF_CORE_READ((struct unix_skb_parms *)cb, fp);
	if (!fp)
		return 0;
	/* the sending socket (the skb's owner), as the send's record names it */
	__u64 ino = BPF_CORE_READ(sk, sk_socket, file, f_inode, i_ino);
	fp_records(fp, ino, (__u64)sk, EV_QUEUED, 0);
	return 0;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(skb_freed, struct sk_buff *skb)
{
	return on_skb_freed(skb);
}

SEC("raw_tp/kfree_skb")
int BPF_PROG(raw_skb_freed, struct sk_buff *skb)
{
	return on_skb_freed(skb);
}

/* A receive that has no room for SCM_RIGHTS (read(), readv(), recvfrom(), recvmsg() without a
 * control buffer) takes the message's data and the kernel closes its fds. The copy of the data
 * comes first (skb_copy_datagram_iovec, for stream and datagram sockets alike), with the fds
 * still attached (UNIXCB(skb).fp): what the syscall asking for the data is tells whether they
 * are about to be installed (recvmsg with a control buffer: its record) or dropped (reported
 * here). MSG_PEEK leaves them queued. Any traced process's copy with fds is looked at, no other. */
#define MSG_PEEK 2
static __always_inline int on_copied(struct sk_buff *skb)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!is_traced(pid_tgid >> 32))
		return 0;
	/* a Unix socket's message: its owner is the sending socket, its cb UNIXCB */
	struct sock *owner = BPF_CORE_READ(skb, sk);
	if (!owner || BPF_CORE_READ(owner, __sk_common.skc_family) != AF_UNIX)
		return 0;
	__u64 cb = (__u64)skb + bpf_core_field_offset(struct sk_buff, cb);
	struct scm_fp_list *fp = BPF_CORE_READ((struct unix_skb_parms *)cb, fp);
	if (!fp)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	long nr = BPF_CORE_READ(regs, orig_ax);
	__u64 flags = 0;
	if (nr == NR_recvmsg) {
		__u64 msg = BPF_CORE_READ(regs, si), control = 0;
		bpf_probe_read_user(&control, 8, (void *)(msg + 32));
		if (control)
			return 0; /* installed (its record says so), or cut short: MSG_CTRUNC */
		flags = BPF_CORE_READ(regs, dx);
	} else if (nr == NR_recvfrom) {
		flags = BPF_CORE_READ(regs, r10);
	} else if (nr != NR_read && nr != NR_readv) {
		return 0;
	}
	if (flags & MSG_PEEK)
		return 0;
	int fd = BPF_CORE_READ(regs, di);
	struct file *f = (struct file *)fd_file(fd, false);
	__u64 ino = BPF_CORE_READ(f, f_inode, i_ino);
	struct socket *so = BPF_CORE_READ(f, private_data);
	__u64 sk = (__u64)BPF_CORE_READ(so, sk);
	fp_records(fp, ino, sk, EV_DROPPED, nr);
	return 0;
}

SEC("tp_btf/skb_copy_datagram_iovec")
int BPF_PROG(fds_dropped, struct sk_buff *skb, int len)
{
	return on_copied(skb);
}

SEC("raw_tp/skb_copy_datagram_iovec")
int BPF_PROG(raw_fds_dropped, struct sk_buff *skb, int len)
{
	return on_copied(skb);
}

/* CUDA driver calls: userspace attaches these to each function with its index as the cookie */
#define CU_IPC_OPEN 8 /* index of cuIpcOpenMemHandle_v2 / cuIpcOpenMemHandle in FUNCS (trace/cuda.py) */
#define CU_IPC_OPEN_OLD 9
#define CU_MEM_CREATE 0
#define CU_EXPORT 1
#define CU_IMPORT 2 /* cuMemImportFromShareableHandle: the fd in arg 1 */
#define CU_SET_ACCESS 5
#define CU_POOL_CREATE 15 /* CUmemPoolProps *: allocType, handleTypes, location {type, id} */
#define CU_POOL_EXPORT 17 /* cuMemPoolExportToShareableHandle: fd out through arg 0 */
#define CU_POOL_IMPORT 18 /* cuMemPoolImportFromShareableHandle: the fd in arg 1 */
#define CU_POOL_IMPORT_PTR 20 /* CUmemPoolPtrExportData * (64 bytes) in arg 2 */

SEC("uprobe")
int cuda_enter(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	if (!is_traced(id >> 32))
		return 0;
	struct cuda_key k = {.tid = (__u32)id, .func = (__u32)bpf_get_attach_cookie(ctx)};
	struct cuda_args a = {};
	a.arg[0] = PT_REGS_PARM1(ctx);
	a.arg[1] = PT_REGS_PARM2(ctx);
	a.arg[2] = PT_REGS_PARM3(ctx);
	a.arg[3] = PT_REGS_PARM4(ctx);
	a.arg[4] = PT_REGS_PARM5(ctx);
	a.t0 = bpf_ktime_get_ns();
	if (k.func == CU_IPC_OPEN || k.func == CU_IPC_OPEN_OLD) /* CUipcMemHandle by value: on the stack */
		bpf_probe_read_user(a.ipc, 64, (void *)(PT_REGS_SP(ctx) + 8));
	if (k.func == CU_MEM_CREATE) /* prop: requestedHandleTypes at +4, location.id at +12 */
		bpf_probe_read_user(a.ipc, 16, (void *)a.arg[2]);
	if (k.func == CU_SET_ACCESS) /* desc[0]: location {type, id}, flags */
		bpf_probe_read_user(a.ipc, 12, (void *)a.arg[2]);
	if (k.func == CU_POOL_CREATE)
		bpf_probe_read_user(a.ipc, 16, (void *)a.arg[1]);
	if (k.func == CU_POOL_IMPORT_PTR)
		bpf_probe_read_user(a.ipc, 64, (void *)a.arg[2]);
	/* the open file an imported fd names, as the syscall records name files: an fd inherited
	 * across fork and exec is the exporter's own open file */
	if ((k.func == CU_IMPORT || k.func == CU_POOL_IMPORT) && a.arg[2] == 1 /* POSIX fd */)
		a.file = fd_file((int)a.arg[1], false);
	bpf_map_update_elem(&cuda_inflight, &k, &a, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int cuda_exit(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cuda_key k = {.tid = (__u32)id, .func = (__u32)bpf_get_attach_cookie(ctx)};
	struct cuda_args *a = bpf_map_lookup_elem(&cuda_inflight, &k);
	if (!a)
		return 0;
	struct rec_cuda *r = reserve(sizeof(*r), EV_CUDA, id);
	if (!r)
		goto done;
	r->h.ret = (__s32)PT_REGS_RC(ctx);
	r->dur = r->h.ktime - a->t0;
	r->h.ktime = a->t0;
	r->h.nfds = k.func;
	for (int i = 0; i < 5; i++)
		r->args[i] = a->arg[i];
	__builtin_memcpy(r->name, a->ipc, 64);
	__builtin_memset(r->name + 64, 0, 64);
	/* outputs: through the first argument's pointer (handle, fd, device address, IPC bytes) */
	if (a->arg[0])
		bpf_probe_read_user(&r->h.file, 8, (void *)a->arg[0]);
	if ((k.func == CU_EXPORT || k.func == CU_POOL_EXPORT) && r->h.ret == 0 &&
	    a->arg[2] == 1 /* POSIX fd */ && a->arg[0]) {
		__s32 fd = -1;
		bpf_probe_read_user(&fd, 4, (void *)a->arg[0]);
		r->h.arg[0] = fd_file(fd, false);
		watch_file(r->h.arg[0]);
	}
	if (k.func == CU_IMPORT || k.func == CU_POOL_IMPORT) {
		r->h.arg[0] = a->file;
		watch_file(a->file);
	}
	if (a->arg[0] && k.func != CU_IPC_OPEN && k.func != CU_IPC_OPEN_OLD &&
	    k.func != CU_MEM_CREATE && k.func != CU_SET_ACCESS && k.func != CU_POOL_CREATE &&
	    k.func != CU_POOL_IMPORT_PTR)
		bpf_probe_read_user(r->name + 64, 64, (void *)a->arg[0]);
	submit(r, false);
done:
	bpf_map_delete_elem(&cuda_inflight, &k);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
