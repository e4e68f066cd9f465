// SPDX-License-Identifier: GPL-2.0
/* vmmtui trace: the calls that share memory between processes, seen in the kernel.
 *
 * Raw tracepoints (tp_btf: no tracefs needed) on sys_enter/sys_exit catch sendmsg/recvmsg
 * (+mmsg) carrying SCM_RIGHTS, pidfd_open, pidfd_getfd, close, close_range, dup*, fcntl(F_DUPFD*)
 * and memfd_create of the traced processes; sched_process_fork/exec/exit follow the process tree
 * (children of a traced process are traced from their first instruction). Every fd that travels is
 * named by its struct file pointer, read from the fd table of the sender (on enter) and of the
 * receiver (on exit): the same pointer on both sides is the same open file, so userspace matches
 * a send to its receive exactly. Two uprobe programs, attached by userspace to each CUDA driver
 * function with the function's index as the BPF cookie, record the driver calls with their
 * CUresult. Records go to one ring buffer; what does not fit is counted, never dropped silently.
 * Rebuild with scripts/build-bpf.sh (the shipped trace.bpf.o must match this source). */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define MAXFDS 16
#define MAXMSGS 8
#define MAXCMSGS 4
#define NAMELEN 128

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
};

/* x86_64 syscall numbers */
#define NR_close 3
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
#define F_DUPFD 0
#define F_DUPFD_CLOEXEC 1030
#define SOL_SOCKET 1
#define SCM_RIGHTS 1
#define AF_UNIX 1

struct event {
	__u32 type;
	__u32 tgid;
	__u32 tid;
	__u32 nfds;
	__u64 ktime;
	__s64 ret;
	__u64 arg[6];
	__s32 fds[MAXFDS];
	__u64 files[MAXFDS];
	__u64 sock_ino;
	__u64 peer_ino;
	__u32 family;
	__u32 namelen;
	__u64 dur;
	char comm[16];
	__u8 name[NAMELEN];
};

struct config {
	__u32 everything; /* trace every process (--all) */
	__u32 self;       /* the tracer's own tgid: never traced */
};

struct cuda_args {
	__u64 arg[6];
	__u64 t0;
	__u8 ipc[64];
};

struct cuda_key {
	__u32 tid;
	__u32 func;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct event);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cuda_key);
	__type(value, struct cuda_args);
} cuda_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct event);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline bool is_traced(__u32 tgid)
{
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&config, &zero);
	if (c && c->self == tgid)
		return false;
	if (c && c->everything)
		return true;
	return bpf_map_lookup_elem(&traced, &tgid) != 0;
}

static __always_inline void watch_file(__u64 f)
{
	__u8 one = 1;
	if (f)
		bpf_map_update_elem(&watched, &f, &one, BPF_ANY);
}

static __always_inline bool is_watched(__u64 f)
{
	return f && bpf_map_lookup_elem(&watched, &f) != 0;
}

#define BPF_RB_NO_WAKEUP 1
#define BPF_RB_FORCE_WAKEUP 2
#define BPF_RB_AVAIL_DATA 0
#define WAKEUP_BYTES (256 << 10)

/* records wake the reader only when a backlog builds up; otherwise it collects them every 25 ms
 * (one wake-up per batch instead of one per record: the tracer's CPU is mostly wake-ups) */
static __always_inline void emit(struct event *e)
{
	__u64 flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP
										      : BPF_RB_NO_WAKEUP;
	/* a refused pidfd call at once: its cause is read from /proc while both processes live */
	if ((e->type == EV_PIDFD_GETFD || e->type == EV_PIDFD_OPEN) && e->ret < 0)
		flags = BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&events, e, sizeof(*e), flags) != 0) {
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&lost, &zero);
		if (n)
			*n += 1;
	}
}

static __always_inline struct event *fresh(__u32 type)
{
	__u32 zero = 0;
	struct event *e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	__u64 id = bpf_get_current_pid_tgid();
	e->type = type;
	e->tgid = id >> 32;
	e->tid = (__u32)id;
	e->ktime = bpf_ktime_get_ns();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	return e;
}

/* i & (MAXFDS - 1), in a form the compiler cannot fold away (the verifier needs to see it) */
static __always_inline __u64 slot(__u64 i)
{
	asm volatile("%0 &= 15" : "+r"(i));
	return i;
}

/* the struct file an fd of the current process names (0 when none) */
static __always_inline __u64 fd_file(int fd)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	unsigned int max = BPF_CORE_READ(fdt, max_fds);
	struct file **arr = BPF_CORE_READ(fdt, fd);
	struct file *f = 0;
	if (fd < 0 || (unsigned int)fd >= max)
		return 0;
	bpf_probe_read_kernel(&f, sizeof(f), &arr[fd]);
	return (__u64)f;
}

static __always_inline void read_socket(struct event *e, int sockfd)
{
	struct file *f = (struct file *)fd_file(sockfd);
	if (!f)
		return;
	e->sock_ino = BPF_CORE_READ(f, f_inode, i_ino);
	struct socket *so = BPF_CORE_READ(f, private_data);
	struct sock *sk = BPF_CORE_READ(so, sk);
	if (!sk)
		return;
	e->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (e->family != AF_UNIX)
		return;
	struct unix_sock *us = (struct unix_sock *)sk;
	struct sock *peer = BPF_CORE_READ(us, peer);
	if (peer)
		e->peer_ino = BPF_CORE_READ(peer, sk_socket, file, f_inode, i_ino);
	struct unix_address *addr = BPF_CORE_READ(us, addr);
	if (!addr && peer)
		addr = BPF_CORE_READ((struct unix_sock *)peer, addr);
	if (!addr)
		return;
	int len = BPF_CORE_READ(addr, len);
	if (len <= 0)
		return;
	if (len > 110)
		len = 110;
	__u64 n = len;
	asm volatile("%0 &= 127" : "+r"(n));
	e->namelen = n;
	bpf_probe_read_kernel(e->name, n, &addr->name);
}

/* the SCM_RIGHTS fds of one user msghdr (at the given address) into e; on_exit reads each fd's
 * file after the kernel installed it (receive), else before the call (send) */
static __always_inline void read_rights(struct event *e, __u64 msg)
{
	__u64 control = 0, controllen = 0;
	bpf_probe_read_user(&control, 8, (void *)(msg + 32));
	bpf_probe_read_user(&controllen, 8, (void *)(msg + 40));
	if (!control || controllen < 16)
		return;
	__u64 off = 0;
	for (int c = 0; c < MAXCMSGS; c++) {
		if (off + 16 > controllen)
			break;
		struct {
			__u64 len;
			__s32 level;
			__s32 type;
		} h = {};
		if (bpf_probe_read_user(&h, sizeof(h), (void *)(control + off)))
			break;
		if (h.len < 16 || off + h.len > controllen)
			break;
		if (h.level == SOL_SOCKET && h.type == SCM_RIGHTS) {
			__u64 n = (h.len - 16) / 4;
			for (int j = 0; j < MAXFDS; j++) {
				if (j >= n)
					break;
				__u64 i = e->nfds;
				if (i >= MAXFDS)
					break;
				i = slot(i);
				__s32 fd = -1;
				bpf_probe_read_user(&fd, 4, (void *)(control + off + 16 + j * 4));
				e->fds[i] = fd;
				e->files[i] = fd_file(fd);
				watch_file(e->files[i]);
				e->nfds = i + 1;
			}
		}
		off += (h.len + 7) & ~7ULL;
	}
}

static __always_inline void read_rights_all(struct event *e, int many)
{
	if (!many) {
		read_rights(e, e->arg[1]);
		return;
	}
	__u64 vlen = e->arg[2];
	for (int m = 0; m < MAXMSGS; m++) {
		if (m >= vlen)
			break;
		read_rights(e, e->arg[1] + m * 64);
	}
}

static __always_inline void stash(struct event *e)
{
	__u32 tid = e->tid;
	bpf_map_update_elem(&inflight, &tid, e, BPF_ANY);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 type;
	switch (id) {
	case NR_sendmsg:
	case NR_sendmmsg:
		type = EV_SEND;
		break;
	case NR_recvmsg:
	case NR_recvmmsg:
		type = EV_RECV;
		break;
	case NR_close:
		type = EV_CLOSE;
		break;
	case NR_close_range:
		type = EV_CLOSE_RANGE;
		break;
	case NR_dup:
	case NR_dup2:
	case NR_dup3:
	case NR_fcntl:
		type = EV_DUP;
		break;
	case NR_memfd_create:
		type = EV_MEMFD;
		break;
	case NR_pidfd_open:
		type = EV_PIDFD_OPEN;
		break;
	case NR_pidfd_getfd:
		type = EV_PIDFD_GETFD;
		break;
	default:
		return 0;
	}
	if (!is_traced(tgid))
		return 0;
	if (id == NR_fcntl) {
		long cmd = BPF_CORE_READ(regs, si);
		if (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC)
			return 0;
	}
	struct event *e = fresh(type);
	if (!e)
		return 0;
	e->arg[0] = BPF_CORE_READ(regs, di);
	e->arg[1] = BPF_CORE_READ(regs, si);
	e->arg[2] = BPF_CORE_READ(regs, dx);
	e->arg[3] = BPF_CORE_READ(regs, r10);
	e->arg[5] = id;
	switch (type) {
	case EV_RECV:
		return 0; /* read whole at exit: a receive already waiting when the trace began counts too */
	case EV_SEND:
		read_rights_all(e, id == NR_sendmmsg);
		if (!e->nfds)
			return 0;
		read_socket(e, (int)e->arg[0]);
		break;
	case EV_CLOSE:
		e->files[0] = fd_file((int)e->arg[0]);
		if (!is_watched(e->files[0]))
			return 0;
		break;
	case EV_DUP:
		if (!is_watched(fd_file((int)e->arg[0])))
			return 0;
		break;
	case EV_MEMFD:
		bpf_probe_read_user_str(e->name, NAMELEN, (void *)e->arg[0]);
		break;
	case EV_PIDFD_GETFD: {
		struct file *f = (struct file *)fd_file((int)e->arg[0]);
		if (f) { /* pidfs keeps the struct pid in the inode (6.9+), older kernels in the file */
			struct pid *p = BPF_CORE_READ(f, f_inode, i_private);
			if (!p)
				p = BPF_CORE_READ(f, private_data);
			e->arg[4] = BPF_CORE_READ(p, numbers[0].nr);
		}
		break;
	}
	}
	stash(e);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	long id = BPF_CORE_READ(regs, orig_ax);
	/* every syscall of the machine passes here: the ones never stashed leave before any map */
	switch (id) {
	case NR_sendmsg:
	case NR_sendmmsg:
	case NR_recvmsg:
	case NR_recvmmsg:
	case NR_close:
	case NR_close_range:
	case NR_dup:
	case NR_dup2:
	case NR_dup3:
	case NR_fcntl:
	case NR_memfd_create:
	case NR_pidfd_open:
	case NR_pidfd_getfd:
		break;
	default:
		return 0;
	}
	struct event *e = bpf_map_lookup_elem(&inflight, &tid);
	if (!e) {
		/* receives: the arguments are still in the saved user registers */
		if ((id != NR_recvmsg && id != NR_recvmmsg) || ret < 0 || !is_traced(pid_tgid >> 32))
			return 0;
		e = fresh(EV_RECV);
		if (!e)
			return 0;
		e->arg[0] = BPF_CORE_READ(regs, di);
		e->arg[1] = BPF_CORE_READ(regs, si);
		e->arg[2] = BPF_CORE_READ(regs, dx);
		e->arg[5] = id;
		e->ret = ret;
		read_rights_all(e, id == NR_recvmmsg);
		if (!e->nfds)
			return 0;
		read_socket(e, (int)e->arg[0]);
		e->dur = 0; /* its start is not known */
		emit(e);
		return 0;
	}
	e->ret = ret;
	switch (e->type) {
	case EV_DUP:
	case EV_MEMFD:
	case EV_PIDFD_OPEN:
	case EV_PIDFD_GETFD:
		if (ret >= 0) {
			e->files[0] = fd_file((int)ret);
			watch_file(e->files[0]);
		}
		break;
	}
	e->dur = bpf_ktime_get_ns() - e->ktime;
	emit(e);
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(proc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 cpid = BPF_CORE_READ(child, pid), ctgid = BPF_CORE_READ(child, tgid);
	if (cpid != ctgid || !is_traced(ptgid))
		return 0;
	__u8 one = 1;
	bpf_map_update_elem(&traced, &ctgid, &one, BPF_ANY);
	struct event *e = fresh(EV_FORK);
	if (!e)
		return 0;
	e->tgid = ptgid;
	e->arg[0] = ctgid;
	emit(e);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(proc_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (!is_traced(tgid))
		return 0;
	struct event *e = fresh(EV_EXEC);
	if (!e)
		return 0;
	const char *fn = BPF_CORE_READ(bprm, filename);
	bpf_probe_read_kernel_str(e->name, NAMELEN, fn);
	emit(e);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(proc_exit, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (!is_traced(tgid))
		return 0;
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0; /* not the last thread */
	struct event *e = fresh(EV_EXIT);
	if (!e)
		return 0;
	e->ret = BPF_CORE_READ(p, exit_code);
	emit(e);
	bpf_map_delete_elem(&traced, &tgid);
	return 0;
}

/* CUDA driver calls: userspace attaches these to each function with its index as the cookie */
#define CU_IPC_OPEN 8 /* index of cuIpcOpenMemHandle_v2 / cuIpcOpenMemHandle in FUNCS (trace/cuda.py) */
#define CU_IPC_OPEN_OLD 9
#define CU_MEM_CREATE 0
#define CU_EXPORT 1
#define CU_SET_ACCESS 5
#define CU_POOL_CREATE 15 /* CUmemPoolProps *: allocType, handleTypes, location {type, id} */
#define CU_POOL_EXPORT 17 /* cuMemPoolExportToShareableHandle: fd out through arg 0 */
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
	struct event *e = fresh(EV_CUDA);
	if (!e)
		goto done;
	e->ret = (__s32)PT_REGS_RC(ctx);
	e->dur = e->ktime - a->t0;
	e->ktime = a->t0;
	e->nfds = k.func;
	for (int i = 0; i < 5; i++)
		e->arg[i] = a->arg[i];
	__builtin_memcpy(e->name, a->ipc, 64);
	/* outputs: through the first argument's pointer (handle, fd, device address, IPC bytes) */
	if (a->arg[0])
		bpf_probe_read_user(&e->files[0], 8, (void *)a->arg[0]);
	if ((k.func == CU_EXPORT || k.func == CU_POOL_EXPORT) && e->ret == 0 &&
	    a->arg[2] == 1 /* POSIX fd */ && a->arg[0]) {
		__s32 fd = -1;
		bpf_probe_read_user(&fd, 4, (void *)a->arg[0]);
		watch_file(fd_file(fd));
	}
	if (a->arg[0] && k.func != CU_IPC_OPEN && k.func != CU_IPC_OPEN_OLD &&
	    k.func != CU_MEM_CREATE && k.func != CU_SET_ACCESS && k.func != CU_POOL_CREATE &&
	    k.func != CU_POOL_IMPORT_PTR)
		bpf_probe_read_user(e->name + 64, 64, (void *)a->arg[0]);
	emit(e);
done:
	bpf_map_delete_elem(&cuda_inflight, &k);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
