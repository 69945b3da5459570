// terngrad-bench: the performance model's size tables (experiments/model, no LibTorch) against the
// LibTorch nets the trainer builds: same tensors, same names, same order, same element counts, so the
// tables cannot drift from models.cpp. Run: ctest -R tg_model_tables_test
#include <gtest/gtest.h>

#include "models.hpp"
#include "tg/model/nets.hpp"

namespace {

void expect_same(const std::string& name, const tg::train::ModelInput& in) {
  SCOPED_TRACE(name + " at " + std::to_string(in.channels) + "x" + std::to_string(in.height) + "x" +
               std::to_string(in.width) + ", " + std::to_string(in.classes) + " classes");
  auto model = tg::train::make_model(name, in);
  tg::model::NetSpec table = tg::model::net(name, in.channels, in.height, in.width, in.classes);
  auto params = model->named_parameters();
  ASSERT_EQ(params.size(), table.tensors.size());
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < params.size(); ++k) {
    EXPECT_EQ(params[k].key(), table.tensors[k].name) << "tensor " << k;
    EXPECT_EQ(static_cast<std::uint64_t>(params[k].value().numel()), table.tensors[k].numel) << params[k].key();
    total += static_cast<std::uint64_t>(params[k].value().numel());
  }
  EXPECT_EQ(total, table.parameters());
}

}  // namespace

TEST(ModelTables, MatchTheLibTorchNets) {
  expect_same("lenet", {1, 28, 28, 10});      // Fashion-MNIST / MNIST
  expect_same("cifarnet", {3, 24, 24, 10});   // CIFAR-10 crops
  expect_same("cifarnet", {1, 24, 24, 10});   // padded Fashion-MNIST crops
  expect_same("alexnet", tg::train::imagenet_input("alexnet"));
  expect_same("googlenet", tg::train::imagenet_input("googlenet"));
  expect_same("vgga", tg::train::imagenet_input("vgga"));
}
