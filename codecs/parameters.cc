#include "codecs/parameters.h"

#include <cmath>

#include <algorithm>

namespace infergate::codecs {

const ParamValue* Parameters::find(std::string_view key) const {
  for (const Entry& e : entries_) {
    if (e.first == key) return &e.second;
  }
  return nullptr;
}

void Parameters::set(std::string key, ParamValue value) {
  for (Entry& e : entries_) {
    if (e.first == key) {
      e.second = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

bool Parameters::erase(std::string_view key) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return e.first == key; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  return true;
}

bool Parameters::operator==(const Parameters& other) const {
  if (entries_.size() != other.entries_.size()) return false;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& [key, value] = entries_[i];
    const auto& [other_key, other_value] = other.entries_[i];
    if (key != other_key) return false;
    const double* a = std::get_if<double>(&value);
    const double* b = std::get_if<double>(&other_value);
    if (a != nullptr && b != nullptr && std::isnan(*a) && std::isnan(*b)) continue;
    if (value != other_value) return false;
  }
  return true;
}

}  // namespace infergate::codecs
