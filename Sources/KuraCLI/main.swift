print("kura")
