/* The few kernel types trace.bpf.c reads, by name only: libbpf relocates every field access
 * against the running kernel's BTF (CO-RE), so offsets here are never used as they are. This keeps
 * the repository free of a generated vmlinux.h (megabytes). x86_64 only (pt_regs, syscall numbers). */
#ifndef VMMTUI_KERNEL_H
#define VMMTUI_KERNEL_H
/* bpf_tracing.h names the x86 registers as the kernel does (di, si, ...) when it sees this */
#define __VMLINUX_H__

typedef unsigned char __u8;
typedef short int __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_LRU_PERCPU_HASH = 10,
	BPF_MAP_TYPE_ARRAY_OF_MAPS = 12,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};
#define BPF_ANY 0
#define BPF_NOEXIST 1
#define BPF_F_MMAPABLE 1024
#define BPF_F_NO_PREALLOC 1
#define BPF_LOCAL_STORAGE_GET_F_CREATE 1

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip,
		cs, flags, sp, ss;
};

struct super_block {
	unsigned long s_magic;
};
struct inode {
	unsigned short i_mode;
	unsigned int i_rdev;
	struct super_block *i_sb;
	unsigned long i_ino;
	void *i_private;
};
struct qstr {
	const unsigned char *name;
};
struct dentry {
	struct dentry *d_parent;
	struct qstr d_name;
};
/* a mount: the vfsmount a path names is the `mnt` inside its struct mount (fs/mount.h); the
 * parent mount and the dentry it is mounted on lead a path up to its root */
struct vfsmount {
	struct dentry *mnt_root;
	int mnt_flags;
};
struct mount {
	struct mount *mnt_parent;
	struct dentry *mnt_mountpoint;
	struct vfsmount mnt;
};
struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
};
struct file {
	void *private_data;
	struct inode *f_inode;
	struct path f_path;
};
struct fdtable {
	unsigned int max_fds;
	struct file **fd;
};
struct files_struct {
	struct fdtable *fdt;
};
typedef struct {
	int counter;
} atomic_t;
struct signal_struct {
	atomic_t live;
};
/* what decides a ptrace access check (pidfd_getfd): credentials, seccomp, namespaces, dumpable */
typedef struct {
	unsigned int val;
} kuid_t;
typedef struct {
	unsigned int val;
} kgid_t;
typedef struct {
	__u64 val;
} kernel_cap_t;
struct ns_common {
	unsigned int inum;
};
struct user_namespace {
	struct ns_common ns;
};
struct pid_namespace {
	struct ns_common ns;
};
struct cred {
	kuid_t uid;
	kgid_t gid;
	kuid_t suid;
	kgid_t sgid;
	kuid_t euid;
	kgid_t egid;
	kernel_cap_t cap_permitted;
	kernel_cap_t cap_effective;
	struct user_namespace *user_ns;
};
struct seccomp {
	int mode;
	atomic_t filter_count;
};
/* mm->flags: an unsigned long until 6.17, a bitmap (mm_flags_t) since; the dumpable bits are the
 * low two either way */
typedef struct {
	unsigned long __mm_flags[1];
} mm_flags_t;
struct mm_struct___bitmap {
	mm_flags_t flags;
};
struct mm_struct___long {
	unsigned long flags;
};
struct mm_struct;
struct hlist_node {
	struct hlist_node *next;
	struct hlist_node **pprev;
};
struct hlist_head {
	struct hlist_node *first;
};
struct pid;
struct task_struct {
	int exit_code;
	int pid;
	int tgid;
	struct files_struct *files;
	struct signal_struct *signal;
	char comm[16];
	struct mm_struct *mm;
	struct pid *thread_pid;
	struct hlist_node pid_links[4];
	const struct cred *cred;
	struct seccomp seccomp;
};
struct linux_binprm {
	const char *filename;
};
struct upid {
	int nr;
	struct pid_namespace *ns;
};
struct pid {
	unsigned int level;
	struct hlist_head tasks[4];
	struct upid numbers[1];
};
struct sock_common {
	unsigned short skc_family;
};
struct socket;
struct sock;
struct sk_buff {
	struct sk_buff *next;
	struct sock *sk;
	char cb[48];
};
struct sk_buff_head {
	struct sk_buff *next;
	__u32 qlen;
};
struct sock {
	struct sock_common __sk_common;
	struct sk_buff_head sk_receive_queue;
	struct socket *sk_socket;
};
struct file;
/* SCM_RIGHTS in flight: UNIXCB(skb).fp of each queued skb (include/net/af_unix.h, net/scm.h) */
struct scm_fp_list {
	short count;
	struct file *fp[253];
};
struct unix_skb_parms {
	struct scm_fp_list *fp;
};
/* the fds of a message being sent or received (net/scm.h) */
struct scm_cookie {
	struct scm_fp_list *fp;
};
struct socket {
	struct file *file;
	struct sock *sk;
};
struct sockaddr_un {
	unsigned short sun_family;
	char sun_path[108];
};
struct unix_address {
	int len;
	struct sockaddr_un name[0];
};
struct unix_sock {
	struct sock sk;
	struct unix_address *addr;
	struct sock *peer;
};

#pragma clang attribute pop

#endif
