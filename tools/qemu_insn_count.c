/* Instruction counts between two marker functions, as a QEMU TCG plugin (plugin API version 1, QEMU 7.2+).
 *
 * The program under test calls mark_begin() right before and mark_end() right after each measured call (two
 * empty, non-inlined functions). The plugin is given their entry addresses and prints, for the k-th
 * begin/end pair it sees, one line "insns K N" with N the guest instructions executed from the first
 * instruction of mark_begin to the first instruction of mark_end (the measured call plus the fixed handful
 * of the marker's own return and the call of mark_end: the same for every pair, so it cancels in
 * comparisons; scripts/mcu_bench.sh subtracts it, measured on an empty pair). Counts are deterministic:
 * QEMU models no timing, so the same binary always gives the same numbers.
 *
 *   gcc -shared -fPIC -O2 -o qemu_insn_count.so tools/qemu_insn_count.c
 *   qemu-system-arm ... -plugin ./qemu_insn_count.so,begin=0x1234,end=0x1240 -d plugin -kernel prog.elf
 *   qemu-arm (user mode) -plugin ./qemu_insn_count.so,begin=0x...,end=0x... -d plugin ./prog   (non-PIE)
 * With the argument profile=FILE it also writes, at exit, the instructions executed per translation block
 * ("ADDRESS COUNT" lines, whole run; scripts/mcu_bench.sh --profile maps them to functions).
 * Addresses are guest virtual addresses (hex with 0x, or decimal); on Thumb the low bit is ignored. The
 * lines go to QEMU's log (stderr, or -D FILE). One vCPU is assumed (the Cortex-M boards, a single-threaded
 * user-mode program).
 *
 * QEMU ships no qemu-plugin.h in Debian: the few declarations this file needs are written out below, as the
 * plugin API version 1 defines them (the ABI is plain C; the enums keep their documented values).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- plugin API v1 (subset) -------------------------------------------------------------------------- */
typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t; /* not read here */
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS = 0 };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 = 0 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb* tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void* userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void* userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);
struct qemu_plugin_insn* qemu_plugin_tb_get_insn(const struct qemu_plugin_tb* tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn* insn);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb* tb, enum qemu_plugin_op op, void* ptr,
                                              uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn* insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void* userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void* userdata);
void qemu_plugin_outs(const char* string);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* ---- counting ---------------------------------------------------------------------------------------- */
/* Every translation block adds its instruction count to `executed` when it starts (inline, cheap). A marker
 * instruction's callback then knows `executed` includes its whole block, so it subtracts the instructions of
 * the block from the marker on: the result is the number executed before the marker, exact. */
static uint64_t executed;
static uint64_t marker_addr[2]; /* begin, end */
static uint64_t begun_at;
static int in_pair;
static unsigned long pairs;

/* Profile: one record per translated block, its execution count incremented inline. Blocks are never
 * freed (a translation may be repeated: the records then add up). */
struct block_record {
  uint64_t vaddr, n_insns, executions;
  struct block_record* next;
};
static struct block_record* blocks;
static const char* profile_path;

/* userdata of a marker callback: which marker (bit 0) and the block's instructions from it on (the rest). */
static void on_marker(unsigned int vcpu, void* userdata) {
  (void)vcpu;
  const uintptr_t u = (uintptr_t)userdata;
  const uint64_t before = executed - (u >> 1);
  char line[96];
  if ((u & 1) == 0) {
    if (in_pair) qemu_plugin_outs("insns: mark_begin twice without mark_end, the first one is dropped\n");
    begun_at = before;
    in_pair = 1;
  } else if (in_pair) {
    snprintf(line, sizeof line, "insns %lu %" PRIu64 "\n", pairs++, before - begun_at);
    qemu_plugin_outs(line);
    in_pair = 0;
  } else {
    qemu_plugin_outs("insns: mark_end without mark_begin, ignored\n");
  }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  (void)id;
  const size_t n = qemu_plugin_tb_n_insns(tb);
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed, n);
  if (profile_path != NULL && n > 0) {
    struct block_record* r = calloc(1, sizeof *r);
    if (r != NULL) {
      r->vaddr = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0));
      r->n_insns = n;
      r->next = blocks;
      blocks = r;
      qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &r->executions, 1);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    struct qemu_plugin_insn* insn = qemu_plugin_tb_get_insn(tb, i);
    const uint64_t pc = qemu_plugin_insn_vaddr(insn) & ~(uint64_t)1;
    for (uintptr_t m = 0; m < 2; ++m)
      if (pc == marker_addr[m])
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker, QEMU_PLUGIN_CB_NO_REGS,
                                               (void*)(((uintptr_t)(n - i) << 1) | m));
  }
}

static void report_at_exit(qemu_plugin_id_t id, void* userdata) {
  (void)id;
  (void)userdata;
  char line[96];
  snprintf(line, sizeof line, "insns total %" PRIu64 " pairs %lu\n", executed, pairs);
  qemu_plugin_outs(line);
  if (profile_path != NULL) {
    FILE* f = fopen(profile_path, "w");
    if (f == NULL) {
      qemu_plugin_outs("insns: cannot write the profile\n");
      return;
    }
    for (const struct block_record* r = blocks; r != NULL; r = r->next)
      if (r->executions != 0) fprintf(f, "%#" PRIx64 " %" PRIu64 "\n", r->vaddr, r->executions * r->n_insns);
    fclose(f);
  }
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc,
                                                               char** argv) {
  (void)info;
  int have = 0;
  for (int i = 0; i < argc; ++i) {
    const char* a = argv[i];
    if (strncmp(a, "profile=", 8) == 0) {
      profile_path = a + 8;
      continue;
    }
    int m = strncmp(a, "begin=", 6) == 0 ? 0 : strncmp(a, "end=", 4) == 0 ? 1 : -1;
    if (m < 0) {
      fprintf(stderr, "qemu_insn_count: unknown argument '%s' (want begin=ADDR,end=ADDR)\n", a);
      return -1;
    }
    marker_addr[m] = strtoull(strchr(a, '=') + 1, NULL, 0) & ~(uint64_t)1;
    have |= 1 << m;
  }
  if (have != 3) {
    fprintf(stderr, "qemu_insn_count: needs begin=ADDR,end=ADDR (the marker functions' addresses)\n");
    return -1;
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, report_at_exit, NULL);
  return 0;
}
