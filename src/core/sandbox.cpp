#include "core/sandbox.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace vb {

#if defined(__x86_64__) || defined(__aarch64__)
namespace {

#if defined(__x86_64__)
constexpr unsigned kArch = AUDIT_ARCH_X86_64;
#else
constexpr unsigned kArch = AUDIT_ARCH_AARCH64;
#endif
constexpr unsigned kDeny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
constexpr unsigned kNoSys = SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA);

// Installs the seccomp program f[0, n) (after PR_SET_NO_NEW_PRIVS, which it needs without
// CAP_SYS_ADMIN); filters stack, the strictest answer wins. Returns "" or why it failed.
std::string install(sock_filter* f, std::size_t n) {
  sock_fprog prog{static_cast<unsigned short>(n), f};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return std::string("PR_SET_NO_NEW_PRIVS: ") + std::strerror(errno);
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    return std::string("PR_SET_SECCOMP: ") + std::strerror(errno);
  return "";
}

// The start of every program here: a call of another architecture refused, the call number
// loaded, and on x86-64 every x32 call (another numbering) refused, in each filter (a launcher's
// runner has forbid_reaching_other_processes's alone).
std::vector<sock_filter> prologue() {
  std::vector<sock_filter> f = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, kDeny),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
  };
#if defined(__x86_64__)
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u /* __X32_SYSCALL_BIT */, 0, 1));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, kDeny));
#endif
  return f;
}

}  // namespace
#endif

std::string forbid_new_processes() {
#if !defined(__x86_64__) && !defined(__aarch64__)
  return "no seccomp filter for this architecture";
#else
  std::vector<sock_filter> f = prologue();
#if defined(__x86_64__)
  f.insert(f.end(), {
                        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fork, 0, 1),
                        BPF_STMT(BPF_RET | BPF_K, kDeny),
                        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_vfork, 0, 1),
                        BPF_STMT(BPF_RET | BPF_K, kDeny),
                    });
#endif
  f.insert(f.end(), {
                        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
                        BPF_STMT(BPF_RET | BPF_K, kNoSys),
                        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 1, 0),
                        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                        // clone(flags, ...): the low word of the first argument (little-endian).
                        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
                        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1),
                        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                        BPF_STMT(BPF_RET | BPF_K, kDeny),
                    });
  return install(f.data(), f.size());
#endif
}

std::string forbid_reaching_other_processes() {
#if !defined(__x86_64__) && !defined(__aarch64__)
  return "no seccomp filter for this architecture";
#else
  const auto self = static_cast<unsigned>(::getpid());
  // Layout: [prologue] [one JEQ per system call] [allow] [self check] [prctl check].
  // Jump targets are resolved after the calls' list is known (BPF jumps are relative, 8 bits).
  enum class To { Self, Deny, Prctl };
  std::vector<std::pair<unsigned, To>> calls = {
      {__NR_kill, To::Self},
      {__NR_tgkill, To::Self},
      {__NR_rt_sigqueueinfo, To::Self},
      {__NR_rt_tgsigqueueinfo, To::Self},
      {__NR_tkill, To::Deny},
      {__NR_prctl, To::Prctl},
  };
#ifdef __NR_pidfd_send_signal
  calls.push_back({__NR_pidfd_send_signal, To::Deny});
#endif
  std::vector<sock_filter> f = prologue();
  const std::size_t first_jeq = f.size();
  const std::size_t allow = first_jeq + calls.size();
  const std::size_t self_check = allow + 1;       // load args[0], compare, allow, deny
  const std::size_t deny = self_check + 3;
  const std::size_t prctl_check = self_check + 4;  // the option, then its value
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const std::size_t at = first_jeq + i;
    const std::size_t target = calls[i].second == To::Self    ? self_check
                               : calls[i].second == To::Deny ? deny
                                                             : prctl_check;
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, calls[i].first,
                         static_cast<unsigned char>(target - at - 1), 0));
  }
  // The first argument's low word (little-endian): pid_t and the prctl option are 32 bits.
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));              // allow
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, self, 0, 1));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, kDeny));                          // deny
  // prctl(PR_SET_DUMPABLE, v): only v == 0 (a runner started by a launcher closes itself
  // after exec, which made it dumpable again).
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_DUMPABLE, 0, 3));
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, kDeny));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  if (f.size() != prctl_check + 6) return "internal error: seccomp program layout";
  return install(f.data(), f.size());
#endif
}

}  // namespace vb
