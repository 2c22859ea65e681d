// Copyright cocotb contributors
// Licensed under the Revised BSD License, see LICENSE for details.
// SPDX-License-Identifier: BSD-3-Clause
//
// cocotb 2.1's share/lib/verilator/verilator.cpp with one change in the time-step loop (marked DLA), used by
// tb/verilator_main.py for every Verilator build of the testbench. Why: cocotb's clock (and any Python
// write) reaches the model as an *inertial* VPI put, queued until VerilatedVpi::doInertialPuts(). The stock
// loop evaluates the model first, then applies the queued puts and evaluates again, so every time step
// costs one evaluation that changes nothing: on a big design (NVDLA) with a clock as the only event of
// most half periods, that is half the simulation time. Applying the queued puts and settling the
// value-change callbacks *before* the first evaluation keeps the order the callbacks see (a RisingEdge
// callback still runs after the clock changed and before the model reacted, and its writes are still
// applied after the edge's evaluation) and drops the useless evaluation. See
// docs/cocotb-verilator-main-loop.md.

#include <libgen.h>  // basename
#include <stdio.h>   // stderr, fprintf

#include <memory>  // std::unique_ptr
#include <string>  // std::string

#include "Vtop.h"
#include "verilated.h"
#include "verilated_vpi.h"

#ifndef VM_TRACE_FST
// emulate new verilator behavior for legacy versions
#define VM_TRACE_FST 0
#endif

#if VM_TRACE
#if VM_TRACE_FST
#include <verilated_fst_c.h>
using verilated_trace_t = VerilatedFstC;
#elif VM_TRACE_SAIF
#include <verilated_saif_c.h>
using verilated_trace_t = VerilatedSaifC;
#else
// VM_TRACE_VCD
#include <verilated_vcd_c.h>
using verilated_trace_t = VerilatedVcdC;
#endif
static verilated_trace_t *tfp;
#endif

static vluint64_t main_time = 0;  // Current simulation time
#if VM_COVERAGE
static bool coverage_per_instance = false;
#endif

double sc_time_stamp() {  // Called by $time in Verilog
    return main_time;     // converts to double, to match
                          // what SystemC does
}

extern "C" {
void vlog_startup_routines_bootstrap(void);
}

static inline bool settle_value_callbacks() {
    bool cbs_called, again;

    // Call Value Change callbacks
    // These can modify signal values so we loop
    // until there are no more changes
    cbs_called = again = VerilatedVpi::callValueCbs();
    while (again) {
        again = VerilatedVpi::callValueCbs();
    }

    return cbs_called;
}

// ---- DLA: AXI RAM ports served in C++ ------------------------------------------------------------------
// tb/fastmem.py's FastAxiRam (the timing of cocotbext-axi's AxiRam) without Python per clock edge: at
// every rising edge of the port's clock, before any cocotb callback of that edge, sample the DUT's
// handshakes (values before the edge), drive R/B and the ready signals as inertial puts (applied after
// the edge's evaluation, like cocotb's writes), accept AR/AW/W, and turn accepted bursts into memory
// reads and writes through Python callbacks (one per burst, per beat for writes). Python attaches a
// port with dla_axi_open (ctypes; symbols exported with -rdynamic) and detaches it with dla_axi_close.
#include <cstdint>
#include <deque>
#include <vector>

extern "C" {
typedef int (*dla_axi_read_fn)(int port, unsigned long long addr, unsigned nbytes, unsigned char *out);
typedef int (*dla_axi_write_fn)(int port, unsigned long long addr, unsigned nbytes,
                                const unsigned char *data);
typedef void (*dla_axi_violation_fn)(int port, const char *channel, const char *message);
}

namespace {
bool dla_axi_enabled = false;  // set by main(): the C++ ports need our loop's edge hook

struct Sig {
    vpiHandle h = nullptr;
    int bits = 0;
};

Sig find_sig(const char *name) {
    Sig s;
    if (name && name[0]) {
        s.h = vpi_handle_by_name(const_cast<PLI_BYTE8 *>(name), nullptr);
        if (s.h) s.bits = vpi_get(vpiSize, s.h);
    }
    return s;
}

bool get_bit(const Sig &s) {
    s_vpi_value v;
    v.format = vpiIntVal;
    vpi_get_value(s.h, &v);
    return v.value.integer & 1;
}

uint64_t get_u64(const Sig &s, uint64_t dflt = 0) {
    if (!s.h) return dflt;
    s_vpi_value v;
    v.format = vpiVectorVal;
    vpi_get_value(s.h, &v);
    uint64_t lo = static_cast<uint32_t>(v.value.vector[0].aval);
    uint64_t hi = s.bits > 32 ? static_cast<uint32_t>(v.value.vector[1].aval) : 0;
    if (s.bits < 64) return (lo | (hi << 32)) & ((uint64_t(1) << s.bits) - 1);
    return lo | (hi << 32);
}

void get_bytes(const Sig &s, std::vector<uint8_t> &out) {
    s_vpi_value v;
    v.format = vpiVectorVal;
    vpi_get_value(s.h, &v);
    for (size_t i = 0; i < out.size(); i++) out[i] = (v.value.vector[i / 4].aval >> (8 * (i % 4))) & 0xFF;
}

void put(const Sig &s, const std::vector<uint8_t> &bytes, bool now) {
    if (!s.h) return;
    std::vector<s_vpi_vecval> vec((s.bits + 31) / 32);
    for (auto &w : vec) w.aval = w.bval = 0;
    for (size_t i = 0; i < bytes.size() && i / 4 < vec.size(); i++)
        vec[i / 4].aval |= static_cast<PLI_INT32>(static_cast<uint32_t>(bytes[i]) << (8 * (i % 4)));
    s_vpi_value v;
    v.format = vpiVectorVal;
    v.value.vector = vec.data();
    s_vpi_time t;
    t.type = vpiSimTime;
    t.high = t.low = 0;
    vpi_put_value(s.h, &v, &t, now ? vpiNoDelay : vpiInertialDelay);
}

void put_u64(const Sig &s, uint64_t x, bool now = false) {
    std::vector<uint8_t> b(8);
    for (int i = 0; i < 8; i++) b[i] = (x >> (8 * i)) & 0xFF;
    put(s, b, now);
}

struct RBeat {
    uint64_t id;
    std::vector<uint8_t> data;
    bool last;
};
struct Burst {
    uint64_t id, addr, len, size, burst;
};
struct WBeat {
    std::vector<uint8_t> data;
    uint64_t strb;
    bool last;
};

struct Port {
    int id;
    bool open = false;
    Sig clk;
    Sig arvalid, arready, araddr, arlen, arid, arsize, arburst;
    Sig rvalid, rready, rdata, rlast, rid, rresp, ruser;
    Sig awvalid, awready, awaddr, awlen, awid, awsize, awburst;
    Sig wvalid, wready, wdata, wstrb, wlast;
    Sig bvalid, bready, bid, bresp, buser;
    unsigned lanes = 8;
    uint64_t dsize = 3;  // log2(lanes): AxSIZE of a full-width beat, for a DUT without AxSIZE
    uint64_t size = 0;  // address space size (addresses wrap modulo it)
    uint64_t strb_mask = 0xFF;
    dla_axi_read_fn read = nullptr;
    dla_axi_write_fn write = nullptr;
    dla_axi_violation_fn violation = nullptr;
    bool last_clk = false;
    bool rvalid_d = false, bvalid_d = false, ready_d = false;
    bool read_dead = false, write_dead = false;
    std::deque<RBeat> rq;
    std::deque<uint64_t> bq;
    std::deque<Burst> ars, aws;
    std::deque<WBeat> ws;
    bool in_burst = false;
    uint64_t wb_id = 0, wb_addr = 0, wb_len = 0, wb_n = 0, wb_type = 1, wb_bytes = 8;

    // Outputs of a rising edge. cocotbext-axi writes them right after the edge (inertial puts, applied after
    // the edge's evaluation), which costs the model a second evaluation on every edge with bus activity.
    // Deferred (the default without a waveform), they are applied with the next falling edge instead, in
    // that edge's evaluation: the DUT's posedge logic samples them at the next rising edge either way,
    // and nothing observes the DUT between (this model and cocotb sample at rising edges); only a
    // waveform would show them half a period later, so a traced run keeps cocotbext's timing.
    bool defer = true;
    std::vector<std::pair<const Sig *, std::vector<uint8_t>>> pending;

    void out(const Sig &s, const std::vector<uint8_t> &bytes) {
        if (!s.h) return;
        if (defer) pending.emplace_back(&s, bytes);
        else put(s, bytes, false);
    }
    void out_u64(const Sig &s, uint64_t x) {
        std::vector<uint8_t> b(8);
        for (int i = 0; i < 8; i++) b[i] = (x >> (8 * i)) & 0xFF;
        out(s, b);
    }
    // Apply deferred outputs: ``now`` at a falling edge (before its evaluation), else as inertial puts.
    void flush(bool now) {
        for (auto &po : pending) put(*po.first, po.second, now);
        pending.clear();
    }

    void record(const char *channel, const std::string &msg) {
        if (violation) violation(id, channel, msg.c_str());
    }

    bool check(const char *kind, const Burst &b, uint64_t &aligned, uint64_t &num_bytes) {
        char buf[256];
        num_bytes = uint64_t(1) << b.size;
        uint64_t length = b.len + 1;
        if (!(num_bytes > 0 && num_bytes <= lanes)) {
            snprintf(buf, sizeof buf, "%s burst size %llu bytes is wider than the %u-byte bus", kind,
                     (unsigned long long)num_bytes, lanes);
            record(kind, buf);
            return false;
        }
        aligned = (b.addr / num_bytes) * num_bytes;
        if (b.burst == 1 && 0x1000 - (aligned & 0xFFF) < num_bytes * length) {
            snprintf(buf, sizeof buf, "%s burst at 0x%llx of %llu x %llu bytes crosses a 4 KiB boundary", kind,
                     (unsigned long long)b.addr, (unsigned long long)length, (unsigned long long)num_bytes);
            record(kind, buf);
            return false;
        }
        if (b.burst > 1) {
            snprintf(buf, sizeof buf, "%s burst type %llu (only FIXED and INCR are served)", kind,
                     (unsigned long long)b.burst);
            record(kind, buf);
            return false;
        }
        return true;
    }

    void process_reads() {
        while (!ars.empty()) {
            Burst b = ars.front();
            ars.pop_front();
            uint64_t cur, num_bytes;
            if (!check("read", b, cur, num_bytes)) {
                read_dead = true;
                ars.clear();
                return;
            }
            uint64_t length = b.len + 1;
            bool whole = b.burst == 1 && num_bytes == lanes && cur % lanes == 0 && cur + length * lanes <= size;
            std::vector<uint8_t> all;
            if (whole) {
                all.resize(length * lanes);
                read(id, cur, length * lanes, all.data());
            }
            for (uint64_t n = 0; n < length; n++) {
                RBeat beat{b.id, std::vector<uint8_t>(lanes), n == length - 1};
                if (whole) {
                    std::copy(all.begin() + n * lanes, all.begin() + (n + 1) * lanes, beat.data.begin());
                } else {
                    uint64_t word = ((cur / lanes) * lanes) % size;
                    read(id, word, lanes, beat.data.data());
                    if (b.burst == 1) cur += num_bytes;
                }
                rq.push_back(std::move(beat));
            }
        }
    }

    void write_bytes(uint64_t addr, const uint8_t *data, unsigned n) { write(id, addr % size, n, data); }

    void process_writes() {
        while (true) {
            if (!in_burst) {
                if (aws.empty()) return;
                Burst b = aws.front();
                aws.pop_front();
                uint64_t cur, num_bytes;
                if (!check("write", b, cur, num_bytes)) {
                    write_dead = true;
                    return;
                }
                in_burst = true;
                wb_id = b.id, wb_addr = cur, wb_len = b.len + 1, wb_n = 0, wb_type = b.burst, wb_bytes = num_bytes;
            }
            while (wb_n < wb_len) {
                if (ws.empty()) return;
                WBeat w = std::move(ws.front());
                ws.pop_front();
                uint64_t word = (wb_addr / lanes) * lanes;
                if (w.strb == strb_mask) {
                    write_bytes(word, w.data.data(), lanes);
                } else {
                    int start = -1;
                    for (unsigned i = 0; i <= lanes; i++) {
                        bool on = i < lanes && ((w.strb >> i) & 1);
                        if (on && start < 0) start = i;
                        else if (!on && start >= 0) {
                            write_bytes(word + start, w.data.data() + start, i - start);
                            start = -1;
                        }
                    }
                }
                if (w.last != (wb_n == wb_len - 1)) {
                    char buf[160];
                    snprintf(buf, sizeof buf, "WLAST %s in beat %llu of a %llu-beat burst", w.last ? "set" : "clear",
                             (unsigned long long)(wb_n + 1), (unsigned long long)wb_len);
                    record("write", buf);
                    write_dead = true;
                    in_burst = false;
                    return;
                }
                wb_n++;
                if (wb_type == 1) wb_addr += wb_bytes;
            }
            bq.push_back(wb_id);
            in_burst = false;
        }
    }

    void drive_beat(const RBeat &beat) {
        if (rid.h) out_u64(rid, beat.id);
        out(rdata, beat.data);
        out_u64(rlast, beat.last ? 1 : 0);
        if (rresp.h) out_u64(rresp, 0);
        if (ruser.h) out_u64(ruser, 0);
    }

    // One rising clock edge (tb/fastmem.py FastAxiRam._step, same order).
    void step() {
        if (!rvalid_d || get_bit(rready)) {
            if (!rq.empty()) {
                drive_beat(rq.front());
                rq.pop_front();
                if (!rvalid_d) out_u64(rvalid, 1), rvalid_d = true;
            } else if (rvalid_d) {
                out_u64(rvalid, 0), rvalid_d = false;
            }
        }
        if (!bvalid_d || get_bit(bready)) {
            if (!bq.empty()) {
                if (bid.h) out_u64(bid, bq.front());
                if (bresp.h) out_u64(bresp, 0);
                if (buser.h) out_u64(buser, 0);
                bq.pop_front();
                if (!bvalid_d) out_u64(bvalid, 1), bvalid_d = true;
            } else if (bvalid_d) {
                out_u64(bvalid, 0), bvalid_d = false;
            }
        }
        bool arv = get_bit(arvalid), awv = get_bit(awvalid), wv = get_bit(wvalid);
        if (ready_d) {
            if (arv)
                ars.push_back(Burst{get_u64(arid), get_u64(araddr), get_u64(arlen), get_u64(arsize, dsize),
                                    get_u64(arburst, 1)});
            if (awv)
                aws.push_back(Burst{get_u64(awid), get_u64(awaddr), get_u64(awlen), get_u64(awsize, dsize),
                                    get_u64(awburst, 1)});
            if (wv) {
                WBeat w{std::vector<uint8_t>(lanes), get_u64(wstrb, strb_mask), get_bit(wlast)};
                get_bytes(wdata, w.data);
                ws.push_back(std::move(w));
            }
        } else {
            out_u64(arready, 1), out_u64(awready, 1), out_u64(wready, 1);
            ready_d = true;
        }
        if ((!aws.empty() || in_burst) && !write_dead) process_writes();
        if (!ars.empty() && !read_dead) process_reads();
    }
};

std::deque<Port> dla_axi_ports;  // a deque: deferred outputs point into ports, which must not move

// Called by the main loop once the queued writes of a new time step (the clock) are applied, before the
// cocotb callbacks of that time step run.
void dla_axi_edge() {
    for (auto &p : dla_axi_ports) {
        if (!p.open) continue;
        bool c = get_bit(p.clk);
        if (c && !p.last_clk) p.step();
        else if (!c && p.last_clk && !p.pending.empty()) p.flush(true);
        p.last_clk = c;
    }
}
}  // namespace

extern "C" {
// Attach a port: ``names`` are 32 full signal names separated by '\n', in the order of the Sig members of
// Port from clk to buser (empty for a signal the DUT lacks). Returns the port id, or -1 when this main
// cannot serve ports (cocotb's stock loop) or a required signal is missing.
__attribute__((visibility("default"))) int dla_axi_open(const char *names, unsigned lanes,
                                                        unsigned long long size, dla_axi_read_fn read,
                                                        dla_axi_write_fn write, dla_axi_violation_fn violation) {
    if (!dla_axi_enabled) return -1;
    std::vector<std::string> n;
    std::string all(names), cur;
    for (char ch : all) {
        if (ch == '\n') n.push_back(cur), cur.clear();
        else cur += ch;
    }
    n.push_back(cur);
    if (n.size() != 32) return -1;
    Port p;
    Sig *sigs[] = {&p.clk, &p.arvalid, &p.arready, &p.araddr, &p.arlen, &p.arid, &p.arsize, &p.arburst,
                   &p.rvalid, &p.rready, &p.rdata, &p.rlast, &p.rid, &p.rresp, &p.ruser,
                   &p.awvalid, &p.awready, &p.awaddr, &p.awlen, &p.awid, &p.awsize, &p.awburst,
                   &p.wvalid, &p.wready, &p.wdata, &p.wstrb, &p.wlast,
                   &p.bvalid, &p.bready, &p.bid, &p.bresp, &p.buser};
    for (size_t i = 0; i < 32; i++) *sigs[i] = find_sig(n[i].c_str());
    const Sig *required[] = {&p.clk, &p.arvalid, &p.arready, &p.araddr, &p.arlen, &p.rvalid, &p.rready,
                             &p.rdata, &p.rlast, &p.awvalid, &p.awready, &p.awaddr, &p.awlen, &p.wvalid,
                             &p.wready, &p.wdata, &p.wlast, &p.bvalid, &p.bready};
    for (const Sig *s : required)
        if (!s->h) return -1;
    p.lanes = lanes;
    while ((1u << p.dsize) > lanes && p.dsize > 0) p.dsize--;
    while ((1u << p.dsize) < lanes) p.dsize++;
    p.size = size;
    p.strb_mask = lanes >= 64 ? ~uint64_t(0) : ((uint64_t(1) << lanes) - 1);
    p.read = read, p.write = write, p.violation = violation;
#if VM_TRACE
    p.defer = tfp == nullptr;  // a waveform shows cocotbext-axi's timing
#endif
    const char *exact = Verilated::commandArgsPlusMatch("dla_axi_exact");
    if (exact && exact[0]) p.defer = false;
    p.id = static_cast<int>(dla_axi_ports.size());
    p.open = true;
    p.last_clk = get_bit(p.clk);
    // construction values, as cocotbext-axi sets them (payloads X: 0 in a 2-state model)
    std::vector<uint8_t> zero(64, 0);
    for (const Sig *s : {&p.rdata, &p.rlast, &p.rid, &p.rresp, &p.ruser, &p.bid, &p.bresp, &p.buser})
        if (s->h) put(*s, zero, true);
    for (const Sig *s : {&p.rvalid, &p.bvalid, &p.arready, &p.awready, &p.wready}) put_u64(*s, 0, true);
    dla_axi_ports.push_back(std::move(p));
    return dla_axi_ports.back().id;
}

__attribute__((visibility("default"))) void dla_axi_close(int port) {
    if (port >= 0 && port < static_cast<int>(dla_axi_ports.size())) {
        dla_axi_ports[port].flush(false);
        dla_axi_ports[port].open = false;
    }
}
}

// ---- DLA: clocks toggled by the main loop -------------------------------------------------------------
// cocotb's GPI clock (Clock(..., impl="gpi")) re-registers a timed VPI callback every half period and
// writes the clock from it as an inertial put. dla_clock_start does the same from the loop itself: at the
// toggle time, after the timed callbacks of that time step (where the GPI clock would have queued its
// write), the new value is queued as an inertial put, so it is applied at the same point with the same
// writes around it. tb/fastclock.py starts and stops these clocks from Python.
namespace {
struct DlaClock {
    Sig sig;
    uint64_t period, high, next;
    bool value, on;
};
std::vector<DlaClock> dla_clocks;

// Queue the toggles due now (the loop calls this where cocotb's timed callbacks ran).
void dla_clock_edges() {
    for (auto &c : dla_clocks) {
        if (!c.on || c.next != main_time) continue;
        c.value = !c.value;
        put_u64(c.sig, c.value ? 1 : 0);
        c.next += c.value ? c.high : c.period - c.high;
    }
}

// The next toggle time, or ~0 when no clock runs.
uint64_t dla_clock_next() {
    uint64_t t = ~uint64_t(0);
    for (const auto &c : dla_clocks)
        if (c.on && c.next < t) t = c.next;
    return t;
}
}  // namespace

extern "C" {
// Start driving ``name`` (full signal name): ``period`` and ``high`` in simulation steps, first value
// ``start_high``, written now as cocotb's Clock.start() does. Returns an id, or -1 (stock loop, no signal).
__attribute__((visibility("default"))) int dla_clock_start(const char *name, unsigned long long period,
                                                           unsigned long long high, int start_high) {
    if (!dla_axi_enabled || high == 0 || high >= period) return -1;
    Sig s = find_sig(name);
    if (!s.h) return -1;
    DlaClock c{s, period, high, 0, start_high != 0, true};
    put_u64(c.sig, c.value ? 1 : 0);
    c.next = main_time + (c.value ? high : period - high);
    dla_clocks.push_back(c);
    return static_cast<int>(dla_clocks.size()) - 1;
}

__attribute__((visibility("default"))) void dla_clock_stop(int id) {
    if (id >= 0 && id < static_cast<int>(dla_clocks.size())) dla_clocks[id].on = false;
}
}

void wrap_up() {
    VerilatedVpi::callCbs(cbEndOfSimulation);

#if VM_TRACE
    if (tfp) {
        // We don't delete the trace object to avoid deadlock in verilator sims.
        tfp->close();
    }
#endif

    // VM_COVERAGE is a define which is set if Verilator is
    // instructed to collect coverage (when compiling the simulation)
#if VM_COVERAGE
    if (coverage_per_instance) {
        Verilated::threadContextp()->coveragep()->forcePerInstance(true);
    }
    VerilatedCov::write();  // Uses +verilator+coverage+file+<filename>,
                            // defaults to coverage.dat
#endif
}

int main(int argc, char **argv) {
#if VM_TRACE_FST
    const char *traceFile = "dump.fst";
#elif VM_TRACE_SAIF
    const char *traceFile = "dump.saif";
#else
    const char *traceFile = "dump.vcd";
#endif
    bool traceOn = false;
    bool traceFlush = false;
    bool coveragePerInstance = false;

    for (int i = 1; i < argc; i++) {
        std::string arg = std::string(argv[i]);
        if (arg == "--coverage-per-instance") {
#if VM_COVERAGE
            coveragePerInstance = true;
#else
            fprintf(stderr,
                    "Error: --coverage-per-instance requires the design to be "
                    "built with coverage support\n");
            return -1;
#endif
        } else if (arg == "--trace") {
#if VM_TRACE
            traceOn = true;
#else
            fprintf(stderr,
                    "Error: --trace requires the design to be built with trace "
                    "support\n");
            return -1;
#endif
        } else if (arg == "--trace-flush") {
            traceFlush = true;
        } else if (arg == "--trace-file") {
            if (++i < argc) {
                traceFile = argv[i];
            } else {
                fprintf(stderr, "Error: --trace-file requires a parameter\n");
                return -1;
            }
        } else if (arg == "--help") {
            fprintf(
                stderr,
                "usage: %s [--coverage-per-instance] [--trace] [--trace-flush] "
                "[--trace-file TRACEFILE]\n"
                "\n"
                "cocotb + Verilator sim\n"
                "\n"
                "options:\n"
                "  --coverage-per-instance  Force per-instance coverage "
                "(requires coverage build)\n"
                "  --trace                  Enable tracing (VCD, SAIF or FST)\n"
                "  --trace-flush            Flush trace at each time step "
                "(slow)\n"
                "  --trace-file             Specify the trace file name (%s by "
                "default)\n",
                basename(argv[0]), traceFile);
            return 0;
        }
    }

    Verilated::commandArgs(argc, argv);
    // DLA: +dla_stock_loop restores cocotb's loop exactly (for before/after measurements).
    const char *stock = Verilated::commandArgsPlusMatch("dla_stock_loop");
    const bool apply_puts_first = !(stock && stock[0]);
    dla_axi_enabled = apply_puts_first;
#if VM_COVERAGE
    coverage_per_instance = coveragePerInstance;
#endif
#ifdef VERILATOR_SIM_DEBUG
    Verilated::debug(99);
#endif
    std::unique_ptr<Vtop> top(new Vtop(""));
    Verilated::fatalOnVpiError(false);  // otherwise it will fail on systemtf

#ifdef VERILATOR_SIM_DEBUG
    Verilated::internalsDump();
#endif

#if VM_TRACE
    Verilated::traceEverOn(true);
    if (traceOn) {
        tfp = new verilated_trace_t;
        top->trace(tfp, 99);
        tfp->open(traceFile);
    }
#endif

    vlog_startup_routines_bootstrap();
    Verilated::addExitCb([](void *) { wrap_up(); }, nullptr);
    VerilatedVpi::callCbs(cbStartOfSimulation);
    settle_value_callbacks();

    while (!Verilated::gotFinish()) {
        do {
            // We must evaluate whole design until we process all 'events' for
            // this time step
            do {
                top->eval_step();
                VerilatedVpi::clearEvalNeeded();
                VerilatedVpi::doInertialPuts();
                settle_value_callbacks();
            } while (VerilatedVpi::evalNeeded());

            // Run ReadWrite callback as we are done processing this eval step
            VerilatedVpi::callCbs(cbReadWriteSynch);
            VerilatedVpi::doInertialPuts();
            settle_value_callbacks();
        } while (VerilatedVpi::evalNeeded());

        top->eval_end_step();

        // Call ReadOnly callbacks
        VerilatedVpi::callCbs(cbReadOnlySynch);

#if VM_TRACE
        if (tfp) {
            tfp->dump(main_time);
            if (traceFlush) {
                tfp->flush();
            }
        }
#endif
        // cocotb controls the clock inputs using cbAfterDelay so
        // skip ahead to the next registered callback
        const vluint64_t NO_TOP_EVENTS_PENDING = static_cast<vluint64_t>(~0ULL);
        vluint64_t next_time_cocotb = VerilatedVpi::cbNextDeadline();
        vluint64_t next_time_timing =
            top->eventsPending() ? top->nextTimeSlot() : NO_TOP_EVENTS_PENDING;
        vluint64_t next_time = std::min(next_time_cocotb, next_time_timing);
        next_time = std::min<vluint64_t>(next_time, dla_clock_next());  // DLA: our clocks

        // If there are no more cbAfterDelay callbacks,
        // the next deadline is max value, so end the simulation now
        if (next_time == NO_TOP_EVENTS_PENDING) {
            break;
        } else {
            main_time = next_time;
        }

        // Call registered NextSimTime
        // It should be called in simulation cycle before everything else
        // but not on first cycle
        VerilatedVpi::callCbs(cbNextSimTime);
        settle_value_callbacks();

        // Call registered timed callbacks (e.g. clock timer)
        // These are called at the beginning of the time step
        // before the iterative regions (IEEE 1800-2012 4.4.1)
        VerilatedVpi::callTimedCbs();
        settle_value_callbacks();

        // DLA: apply the writes the timed callbacks queued (the clock edge) and run the value-change
        // callbacks they trigger now, so the first eval_step of the next time step sees them; the stock
        // loop applied them only after an eval_step that had nothing to do.
        if (apply_puts_first) {
            dla_clock_edges();  // DLA: our clocks queue their toggles where cocotb's clock callbacks would
            VerilatedVpi::doInertialPuts();
            dla_axi_edge();  // DLA: C++ AXI ports sample this edge before any cocotb callback
            settle_value_callbacks();
        }
    }

    top->final();

    wrap_up();

#if VM_TRACE
    if (tfp) {
        delete tfp;
        tfp = nullptr;
    }
#endif

    // Fail the sim if any assertion/error fired during the run.
    if (Verilated::threadContextp()->errorCount() > 0) {
        return 1;
    }

    return 0;
}
