// SPDX-License-Identifier: Apache-2.0
#include "bench_util.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/core/provenance.hpp"
#include "tessera/cuda/runtime.hpp"

namespace tessera::tools {

std::string given_command(const CLI::App& cmd) {
  std::string line = "tessera bench " + cmd.get_name();
  for (const auto* opt : cmd.get_options()) {
    if (opt->count() > 0 && !opt->get_lnames().empty()) {
      const bool flag = opt->get_type_size() == 0 || opt->get_expected_max() == 0;
      line += flag ? fmt::format(" --{}", opt->get_lnames()[0])
                   : fmt::format(" --{} {}", opt->get_lnames()[0], opt->as<std::string>());
    }
  }
  return line;
}

void refuse_options_of_device(const CLI::App& cmd, const std::string& device,
                              const std::string& only_on, const std::vector<std::string>& names) {
  if (device == only_on) {
    return;
  }
  std::string given;
  for (const std::string& name : names) {
    if (cmd.count(name) > 0) {
      given += (given.empty() ? "" : ", ") + name;
    }
  }
  TESSERA_EXPECTS(given.empty(), ValueError,
                  "{} tune(s) the {} run only: leave it out on --device {}, or give --device {}",
                  given, only_on == "cuda" ? "GPU" : "CPU", device, only_on);
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p))
      out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return out;
}

nlohmann::json machine_json() {
  nlohmann::json m;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  m["hostname"] = host;
  m["hardware_threads"] = std::thread::hardware_concurrency();
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpu, line)) {
    if (line.rfind("model name", 0) == 0) {
      m["cpu"] = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::ifstream mem("/proc/meminfo");
  while (std::getline(mem, line)) {
    if (line.rfind("MemTotal", 0) == 0) {
      std::istringstream is(line.substr(9));
      int64_t kb = 0;
      is >> kb;
      m["memory_bytes"] = kb * 1024;
      break;
    }
  }
  m["kernel"] = run_capture("uname -sr 2>/dev/null");
  m["load_average"] = run_capture("cut -d' ' -f1-3 /proc/loadavg 2>/dev/null");
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::vector<int64_t> parse_size_list(const std::string& s, const std::string& flag) {
  std::vector<int64_t> out;
  auto num = [&](const std::string& t) {
    size_t used = 0;
    int64_t v = -1;
    try {
      v = std::stoll(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TESSERA_EXPECTS(used == t.size() && v > 0, ValueError,
                    "{}: '{}' is not a positive integer (in '{}')", flag, t, s);
    return v;
  };
  const size_t dots = s.find("..");
  if (dots != std::string::npos) {
    const int64_t lo = num(s.substr(0, dots)), hi = num(s.substr(dots + 2));
    TESSERA_EXPECTS(lo <= hi, ValueError, "{}: empty range '{}'", flag, s);
    for (int64_t v = lo;; v *= 2) {
      out.push_back(v);
      if (v > hi / 2) {
        break;  // the next doubling passes hi (and may overflow)
      }
    }
    return out;
  }
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    out.push_back(num(s.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return out;
}

nlohmann::json phases_json(const PhaseTimer& timer) {
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& p : timer.phases())
    phases.push_back({{"name", p.name}, {"seconds", p.seconds}, {"peak_rss", p.peak_rss}});
  return phases;
}

void write_json_report(const std::string& path, const nlohmann::json& j) {
  write_text_atomic(path, j.dump(2) + "\n");  // the missing folders made, never half a file
  fmt::print("wrote {}\n", path);
}

void check_report_paths(const std::string& json, const std::string& results) {
  check_output_path("--json", json);
  check_output_path("--results", results, /*folder=*/true);
}

std::string blocks_digest(const std::vector<std::vector<ops::Block>>& batches) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto add = [&](int64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xFF;
      h *= 0x100000001b3ull;
    }
  };
  auto add_all = [&](const std::vector<int64_t>& a) {
    add(static_cast<int64_t>(a.size()));
    for (int64_t v : a)
      add(v);
  };
  for (const auto& blocks : batches) {
    add(static_cast<int64_t>(blocks.size()));
    for (const ops::Block& b : blocks) {
      add(b.num_dst);
      add_all(b.src_nodes);
      add_all(b.src);
      add_all(b.dst);
      add_all(b.eids);
    }
  }
  return fmt::format("{:016x}", h);
}

namespace {
std::string tag_chars(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (ok)
      out += c;
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-')
    out.pop_back();
  return out.empty() ? "unknown" : out;
}
}  // namespace

std::string machine_tag(bool gpu) {
  if (gpu) {
    // cuda::describe(): "CUDA runtime 13.0, 1 device(s); [0] NVIDIA H200 sm_90 139.8 GiB"
    const std::string d = cuda::describe();
    const size_t a = d.find("[0] "), b = d.find(" sm_", a == std::string::npos ? 0 : a);
    if (a != std::string::npos && b != std::string::npos)
      return tag_chars(d.substr(a + 4, b - a - 4));
  }
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return tag_chars(host);
}

std::string sample_config_tag(const std::string& graph, const std::vector<int64_t>& fanouts,
                              int64_t batch_size, bool weighted, bool replace,
                              const std::string& order, const std::vector<std::string>& flags) {
  std::string tag;
  if (weighted) {
    tag += "-weighted";
  }
  if (replace) {
    tag += "-replace";
  }
  if (order != "stored") {
    tag += "-" + tag_chars(order);
  }
  if (fanouts != std::vector<int64_t>{15, 10, 5}) {
    tag += "-fanouts";
    for (int64_t f : fanouts) {
      tag += f < 0 ? "-all" : fmt::format("-{}", f);
    }
  }
  if (batch_size != 1024) {
    tag += fmt::format("-batch-{}", batch_size);
  }
  if (graph != "rmat:21,25") {
    const std::filesystem::path p(graph);
    const std::string name =
        p.has_filename() ? p.filename().string() : p.parent_path().filename().string();
    tag += "-" + tag_chars(name.empty() ? graph : name);
  }
  for (const std::string& f : flags) {
    tag += "-" + tag_chars(f);
  }
  return tag;
}

std::string result_path(const std::string& dir, const std::string& bench,
                        const std::string& machine) {
  const std::filesystem::path folder = std::filesystem::path(dir) / bench;
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  TESSERA_EXPECTS(!ec, IOError, "{}: cannot create the results folder ({})", folder.string(),
                  ec.message());
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char date[16];
  std::strftime(date, sizeof date, "%Y-%m-%d", &tm);
  std::string commit = source_commit();
  std::replace(commit.begin(), commit.end(), '+', '-');
  return (folder / fmt::format("{}-{}-{}.json", date, commit, machine)).string();
}

}  // namespace tessera::tools
