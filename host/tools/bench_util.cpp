#include "bench_util.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "tessera/core/error.hpp"

namespace tessera::tools {

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

std::string commit_id() {
  std::string c = run_capture("git rev-parse --short HEAD 2>/dev/null");
  if (c.empty()) return "unknown";
  if (!run_capture("git status --porcelain --untracked-files=no 2>/dev/null").empty())
    c += "+dirty";
  return c;
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
    for (int64_t v = lo; v <= hi; v *= 2)
      out.push_back(v);
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
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    TESSERA_EXPECTS(f.good(), IOError, "{}: cannot write the JSON report", path);
    f << j.dump(2) << "\n";
    f.flush();
    if (!f.good()) {
      std::remove(tmp.c_str());
      TESSERA_FAIL(IOError, "{}: write failed", path);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    TESSERA_FAIL(IOError, "{}: cannot rename the finished report into place", path);
  }
  fmt::print("wrote {}\n", path);
}

}  // namespace tessera::tools
